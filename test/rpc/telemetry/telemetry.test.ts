import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../../helpers/redis.js";

/** Telemetry (docs/telemetry.md) on memory and on Redis, where counts are kept per hour as events arrive. */

const HOUR = 3_600_000;

function event(overrides: Record<string, unknown> = {}) {
  return {
    name: "app.start",
    timestamp: new Date(Date.now() - 60_000).toISOString(),
    component: "desktop",
    version: "1.2.0",
    clientId: "c-1",
    attributes: { durationMs: 10 },
    ...overrides,
  };
}

for (const driver of ["memory", "redis"] as const) {
  describe(`telemetry on ${driver}`, () => {
    const prefix = uniqueRedisPrefix();
    const env: Record<string, string> = driver === "redis" ? { STORAGE: "redis", REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix } : {};
    let server: TestServer;
    let other: TestServer | undefined;
    let alice: Record<string, string>;
    let bob: Record<string, string>;
    const ingest = (events: unknown, headers = alice, on = server) =>
      on.request("/gateway/v1/telemetry/events", { method: "POST", headers, json: { events } });

    beforeAll(async () => {
      server = await startTestServer({ ...env, TELEMETRY_INGEST_PER_MINUTE: "400", GATEWAY_MAX_PAYLOAD_BYTES: "200000" });
      if (driver === "redis")
        other = await startTestServer({ ...env, TELEMETRY_INGEST_PER_MINUTE: "400", GATEWAY_MAX_PAYLOAD_BYTES: "200000" });
      alice = bearer((await registerUser(server)).token);
      bob = bearer((await registerUser(server)).token);
    });
    afterAll(async () => {
      await other?.close();
      await server.close();
      if (driver === "redis") await dropRedisPrefix(prefix);
    });

    it("accepts a batch event by event: a bad event is rejected with its reasons and never sinks the batch", async () => {
      const batch = [
        event(),
        event({ name: "App Start" }),
        event({ version: "1.2" }),
        event({ timestamp: new Date(Date.now() + 10 * 60_000).toISOString() }),
        event({ timestamp: new Date(Date.now() - 40 * 86_400_000).toISOString() }),
        event({ attributes: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, i])) }),
        event({ attributes: { nested: { a: 1 } } }),
        event({ attributes: { long: "x".repeat(2000) } }),
        event({ clientId: undefined }),
        event({ timestamp: Date.now() - 1_000, name: "app.stop" }),
      ];
      const res = await ingest(batch);
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ accepted: 2, rejected: 8 });
      const byIndex = (i: number) => res.body.results[i];
      expect(byIndex(0)).toMatchObject({ index: 0, status: "accepted", id: expect.stringMatching(/^tev_/) });
      expect(byIndex(1).errors.join()).toMatch(/dotted lowercase/);
      expect(byIndex(2).errors.join()).toMatch(/SemVer/);
      expect(byIndex(3).errors.join()).toMatch(/future/);
      expect(byIndex(4).errors.join()).toMatch(/retention/);
      expect(byIndex(5).errors.join()).toMatch(/at most 32 keys/);
      expect(byIndex(6).errors.join()).toMatch(/attribute values/);
      expect(byIndex(7).errors.join()).toMatch(/1024 characters/);
      expect(byIndex(8).errors.join()).toMatch(/clientId/);
      expect(byIndex(9)).toMatchObject({ status: "accepted" });
    });

    it("refuses an empty batch, one over 500 events (400) and one over the payload limit (413)", async () => {
      expect((await ingest([])).status).toBe(400);
      const tooMany = await ingest(Array.from({ length: 501 }, () => event()));
      expect(tooMany.status).toBe(400);
      expect(JSON.stringify(tooMany.body)).toMatch(/1 to 500 events/);
      const huge = await ingest(
        Array.from({ length: 100 }, () => event({ attributes: { note: "y".repeat(1000), more: "z".repeat(1000) } })),
      );
      expect(huge.status).toBe(413);
      expect((await ingest("not a list")).status).toBe(400);
    });

    it("keeps each tenant's events to itself: lists, summaries", async () => {
      await ingest([event({ name: "bob.only", clientId: "bob-client" })], bob);
      const mine = await server.request("/gateway/v1/telemetry/events?name=bob.only", { headers: alice });
      expect(mine.body.data).toEqual([]);
      const theirs = await server.request("/gateway/v1/telemetry/events?name=bob.only", { headers: bob });
      expect(theirs.body.data).toHaveLength(1);
      const summary = await server.request("/gateway/v1/telemetry/summary?groupBy=name", { headers: alice });
      expect(summary.body.groups.map((g: { key: string }) => g.key)).not.toContain("bob.only");
      const bobs = await server.request("/gateway/v1/telemetry/summary?groupBy=name", { headers: bob });
      expect(bobs.body.total).toMatchObject({ count: 1, clients: 1 });
    });

    it("lists with filters and a cursor, oldest first, without repeats", async () => {
      const base = Date.now() - 2 * HOUR;
      const batch = Array.from({ length: 25 }, (_, i) =>
        event({
          name: "page.view",
          component: i % 2 ? "web" : "mobile",
          timestamp: new Date(base + i * 1000).toISOString(),
          clientId: `p-${i}`,
        }),
      );
      expect((await ingest(batch, bob)).body.accepted).toBe(25);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const query: string = `name=page.view&limit=10${cursor ? `&cursor=${cursor}` : ""}`;
        const page = await server.request(`/gateway/v1/telemetry/events?${query}`, { headers: bob });
        expect(page.status).toBe(200);
        seen.push(...page.body.data.map((e: { clientId: string }) => e.clientId));
        cursor = page.body.nextCursor;
        pages += 1;
      } while (cursor && pages < 10);
      expect(seen).toEqual(batch.map((e) => e.clientId));
      const web = await server.request("/gateway/v1/telemetry/events?name=page.view&component=web&limit=1000", { headers: bob });
      expect(web.body.data).toHaveLength(12);
      const windowed = await server.request(
        `/gateway/v1/telemetry/events?name=page.view&since=${new Date(base + 10_000).toISOString()}&until=${new Date(base + 15_000).toISOString()}`,
        { headers: bob },
      );
      expect(windowed.body.data.map((e: { clientId: string }) => e.clientId)).toEqual(["p-10", "p-11", "p-12", "p-13", "p-14"]);
      for (const query of [
        "cursor=bogus",
        "since=yesterday",
        "limit=0",
        `since=${new Date().toISOString()}&until=${new Date(Date.now() - HOUR).toISOString()}`,
      ]) {
        expect((await server.request(`/gateway/v1/telemetry/events?${query}`, { headers: bob })).status, query).toBe(400);
      }
    });

    it("summarises by name, component, version and day with distinct clients and p50/p95/max of a metric", async () => {
      const { token } = await registerUser(server);
      const carol = bearer(token);
      const t = Date.now() - 30 * 60_000;
      const batch = Array.from({ length: 100 }, (_, i) =>
        event({
          name: i < 60 ? "sync.done" : "sync.failed",
          component: "agent",
          version: i < 30 ? "1.0.0" : "1.1.0",
          clientId: `cl-${i % 20}`,
          timestamp: new Date(t + i).toISOString(),
          attributes: { durationMs: i + 1, ok: i < 60 },
        }),
      );
      expect((await ingest(batch, carol)).body.accepted).toBe(100);
      const byName = (await server.request("/gateway/v1/telemetry/summary?groupBy=name&metric=durationMs", { headers: carol })).body;
      expect(byName.total).toMatchObject({ count: 100, clients: 20 });
      expect(byName.groups.map((g: { key: string; count: number }) => [g.key, g.count])).toEqual([
        ["sync.done", 60],
        ["sync.failed", 40],
      ]);
      const near = (value: number, expected: number) => expect(Math.abs(value - expected) / expected).toBeLessThanOrEqual(0.011);
      near(byName.total.metric.p50, 50);
      near(byName.total.metric.p95, 95);
      expect(byName.total.metric.max).toBe(100);
      expect(byName.groups[0].metric.max).toBe(60);
      near(byName.groups[1].metric.p50, 80);
      const byVersion = (await server.request("/gateway/v1/telemetry/summary?groupBy=version", { headers: carol })).body;
      expect(byVersion.groups.map((g: { key: string; count: number; clients: number }) => [g.key, g.count, g.clients])).toEqual([
        ["1.1.0", 70, 20],
        ["1.0.0", 30, 20],
      ]);
      expect(byVersion.groups[0].metric).toBeUndefined();
      const byComponent = (await server.request("/gateway/v1/telemetry/summary?groupBy=component", { headers: carol })).body;
      expect(byComponent.groups).toEqual([expect.objectContaining({ key: "agent", count: 100 })]);
      const byDay = (await server.request("/gateway/v1/telemetry/summary?groupBy=day&metric=durationMs", { headers: carol })).body;
      expect(byDay.groups.reduce((sum: number, g: { count: number }) => sum + g.count, 0)).toBe(100);
      expect(byDay.groups.at(-1).key).toBe(new Date(t).toISOString().slice(0, 10));
      expect(byDay.since.endsWith(":00:00.000Z")).toBe(true);
      const outside = (
        await server.request(`/gateway/v1/telemetry/summary?until=${new Date(t - 2 * HOUR).toISOString()}`, { headers: carol })
      ).body;
      expect(outside.total).toMatchObject({ count: 0, clients: 0 });
      for (const query of [
        "groupBy=hour",
        "metric=1bad",
        `since=${new Date().toISOString()}&until=${new Date(Date.now() - HOUR).toISOString()}`,
      ]) {
        expect((await server.request(`/gateway/v1/telemetry/summary?${query}`, { headers: carol })).status, query).toBe(400);
      }
    });

    it("limits ingest per tenant per minute, shared across instances", async () => {
      const { token } = await registerUser(server);
      const dave = bearer(token);
      const batch = (n: number) => Array.from({ length: n }, () => event({ name: "limit.test" }));
      expect((await ingest(batch(300), dave)).status).toBe(202);
      const second = await ingest(batch(150), dave, other ?? server);
      expect(second.status).toBe(429);
      expect(Number(second.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(JSON.stringify(second.body)).toMatch(/400 events per minute/);
      // Another tenant is not affected.
      expect((await ingest(batch(10), alice)).status).toBe(202);
    });
  });
}
