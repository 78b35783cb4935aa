import { describe, expect, it } from "vitest";
import { PassiveStats, PASSIVE_WINDOW_MS } from "../../../rpc/model-registry/passive-stats.js";

const sample = (at: number, latencyMs: number, ok = true) => ({
  model: "m",
  ok,
  latencyMs,
  at,
  ...(ok ? {} : { error: `failed at ${at}` }),
});

describe("passive stats", () => {
  it("counts the samples of the last five minutes only", () => {
    const stats = new PassiveStats();
    const now = 10 * PASSIVE_WINDOW_MS;
    stats.record(sample(now - PASSIVE_WINDOW_MS - 1, 999));
    stats.record(sample(now - 1000, 10));
    stats.record(sample(now - 500, 30, false));
    stats.record(sample(now - 10, 20));
    const snap = stats.snapshot("m", now);
    expect(snap.requests).toBe(3);
    expect(snap.errors).toBe(1);
    expect(snap.errorRate).toBeCloseTo(1 / 3);
    expect(snap.latencyMs).toEqual({ p50: 10, p95: 20 });
    expect(snap.lastError).toEqual({ message: `failed at ${now - 500}`, at: new Date(now - 500).toISOString() });
    expect(stats.snapshot("other", now).requests).toBe(0);
  });

  it("keeps the newest 5,000 samples of a model once more arrive, oldest overwritten first", () => {
    const stats = new PassiveStats();
    const now = 10 * PASSIVE_WINDOW_MS;
    // 7,500 calls within the window: the first 2,500 (latency 1000) are overwritten by later ones.
    for (let i = 0; i < 7_500; i++) stats.record(sample(now - 7_500 + i, i < 2_500 ? 1000 : 1));
    const snap = stats.snapshot("m", now);
    expect(snap.requests).toBe(5_000);
    expect(snap.latencyMs).toEqual({ p50: 1, p95: 1 });
    // Old samples leave the window in order even after the ring wrapped.
    const later = stats.snapshot("m", now - 7_500 + 6_000 + PASSIVE_WINDOW_MS);
    expect(later.requests).toBe(1_499);
  });
});
