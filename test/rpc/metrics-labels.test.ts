import { describe, expect, it } from "vitest";
import { EVENT_LAG_GROUPS, Metrics } from "../../rpc/metrics.js";

/** Labels chosen by tenants stay bounded (docs/observability.md "Metrics"). */
describe("the consumer-group label of the event lag", () => {
  it("names a tenant's group for the first groups an instance sees, then answers other, and keeps the named ones", async () => {
    const metrics = new Metrics();
    for (let i = 0; i < EVENT_LAG_GROUPS; i++) expect(metrics.lagGroup("ten_a", `group-${i}`)).toBe(`ten_a/group-${i}`);
    expect(metrics.lagGroup("ten_b", "group-0")).toBe("other");
    expect(metrics.lagGroup("ten_a", "group-0")).toBe("ten_a/group-0");
    for (let i = 0; i < 3 * EVENT_LAG_GROUPS; i++)
      metrics.eventLag.observe({ group: metrics.lagGroup("ten_c", `many-${i}`), delivery: "first" }, 0.5);
    const text = await metrics.registry.metrics();
    const series = text.split("\n").filter((line) => line.startsWith("gateway_event_consume_lag_seconds_count"));
    expect(series).toEqual(['gateway_event_consume_lag_seconds_count{group="other",delivery="first"} 300']);
  });
});
