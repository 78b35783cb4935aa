import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { inRollout, rolloutBucket } from "../../../rpc/updates/rollout-bucket.js";

describe("rollout bucketing", () => {
  it("is deterministic and monotone: raising the percentage only ever adds a client", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 64 }),
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.double({ min: 0, max: 100, noNaN: true }),
        (clientId, a, b) => {
          const [low, high] = a <= b ? [a, b] : [b, a];
          expect(rolloutBucket(clientId, "app", "1.0.0")).toBe(rolloutBucket(clientId, "app", "1.0.0"));
          if (inRollout(clientId, "app", "1.0.0", low)) expect(inRollout(clientId, "app", "1.0.0", high)).toBe(true);
        },
      ),
    );
  });

  it("places nobody at 0 % and everybody at 100 %, and buckets releases independently", () => {
    const ids = Array.from({ length: 2_000 }, (_, i) => `id-${i}`);
    expect(ids.filter((id) => inRollout(id, "app", "1.0.0", 0))).toEqual([]);
    expect(ids.every((id) => inRollout(id, "app", "1.0.0", 100))).toBe(true);
    const first = new Set(ids.filter((id) => inRollout(id, "app", "1.0.0", 10)));
    const second = ids.filter((id) => inRollout(id, "app", "1.1.0", 10));
    const overlap = second.filter((id) => first.has(id)).length;
    // Independent 10 % samples overlap in about 1 % of ids, not 10 %.
    expect(overlap).toBeLessThan(ids.length * 0.03);
  });
});
