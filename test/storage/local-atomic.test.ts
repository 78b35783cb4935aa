import { afterEach, describe, expect, it, vi } from "vitest";
import { LocalAtomic } from "../../storage/atomic.js";

/**
 * LocalAtomic keeps each account's holds in a Map with their sum and earliest lease end
 * (storage/atomic.ts): what it answers must be what a full recount would give.
 */
describe("LocalAtomic holds", () => {
  afterEach(() => vi.useRealTimers());

  it("re-placing a hold id replaces its amount instead of adding to it", async () => {
    const atomic = new LocalAtomic();
    await atomic.adjust("credits", 100);
    expect(await atomic.hold("h1", [{ key: "credits", kind: "balance", amount: 30 }], 60_000)).toBeNull();
    expect(await atomic.hold("h1", [{ key: "credits", kind: "balance", amount: 50 }], 60_000)).toBeNull();
    expect(await atomic.account("credits")).toMatchObject({ value: 100, held: 50 });
    // 51 does not fit whole: held capped at the 50 that remain; then nothing remains.
    expect(await atomic.hold("h2", [{ key: "credits", kind: "balance", amount: 51 }], 60_000)).toBeNull();
    expect(await atomic.account("credits")).toMatchObject({ value: 100, held: 100, capped: "h2" });
    expect(await atomic.hold("h3", [{ key: "credits", kind: "balance", amount: 1 }], 60_000)).toMatchObject({
      index: 0,
      value: 100,
      held: 100,
    });
    await atomic.settle("h1", [{ key: "credits", delta: -20 }]);
    await atomic.settle("h2", [{ key: "credits", delta: -51 }]);
    expect(await atomic.account("credits")).toEqual({ value: 29, held: 0, ttlMs: 0 });
  });

  it("releases holds whose lease ran out, earliest first, on the next use of the account", async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const atomic = new LocalAtomic();
    await atomic.adjust("credits", 100);
    await atomic.hold("short", [{ key: "credits", kind: "balance", amount: 40 }], 1_000);
    await atomic.hold("long", [{ key: "credits", kind: "balance", amount: 40 }], 10_000);
    await atomic.hold("capped", [{ key: "credits", kind: "balance", amount: 40 }], 500);
    expect(await atomic.account("credits")).toMatchObject({ held: 100, capped: "capped" });
    expect(await atomic.hold("third", [{ key: "credits", kind: "balance", amount: 40 }], 10_000)).not.toBeNull();
    vi.advanceTimersByTime(500);
    // The capped hold's lease ran out: released, and no longer counted as the capped one.
    expect(await atomic.account("credits")).toEqual({ value: 100, held: 80, ttlMs: 0 });
    vi.advanceTimersByTime(500);
    expect(await atomic.account("credits")).toMatchObject({ held: 40 });
    expect(await atomic.hold("third", [{ key: "credits", kind: "balance", amount: 40 }], 10_000)).toBeNull();
    // Renewed, the long hold outlives its first lease; the third does not.
    await atomic.renew("long", ["credits"], 20_000);
    vi.advanceTimersByTime(10_000);
    expect(await atomic.account("credits")).toMatchObject({ value: 100, held: 40 });
    // Settling an expired hold applies the delta without releasing twice.
    await atomic.settle("third", [{ key: "credits", delta: -10 }]);
    expect(await atomic.account("credits")).toMatchObject({ value: 90, held: 40 });
    vi.advanceTimersByTime(10_000);
    expect(await atomic.account("credits")).toMatchObject({ value: 90, held: 0 });
  });

  it("a refused hold changes no account; an admitted one holds every line", async () => {
    const atomic = new LocalAtomic();
    await atomic.adjust("credits", 100);
    const lines = [
      { key: "credits", kind: "balance" as const, amount: 10 },
      { key: "spend", kind: "usage" as const, amount: 10, limit: 19 },
      { key: "rpm", kind: "usage" as const, amount: 1, limit: 100, windowMs: 60_000, commit: true },
    ];
    expect(await atomic.hold("a", lines, 60_000)).toBeNull();
    // 9 of spend remains: admitted, capped at 9; a third finds nothing remaining.
    expect(await atomic.hold("b", lines, 60_000)).toBeNull();
    expect(await atomic.account("spend")).toMatchObject({ value: 0, held: 19, capped: "b" });
    expect(await atomic.hold("c", lines, 60_000)).toMatchObject({ index: 1, value: 0, held: 19 });
    expect(await atomic.account("credits")).toMatchObject({ value: 100, held: 20 });
    expect(await atomic.account("rpm")).toMatchObject({ value: 2, held: 0 });
    await atomic.settle("b", [
      { key: "credits", delta: -10 },
      { key: "spend", delta: 10 },
    ]);
    await atomic.settle("a", [
      { key: "credits", delta: -7 },
      { key: "spend", delta: 7 },
    ]);
    // b used 10 on a hold capped at 9 (the settlement charges what was used): 17 of 19.
    expect(await atomic.account("spend")).toEqual({ value: 17, held: 0, ttlMs: 0 });
    expect(await atomic.hold("c", lines, 60_000)).toBeNull();
    expect(await atomic.account("rpm")).toMatchObject({ value: 3 });
    // requests per minute stay exact: a commit line is never capped.
    const rpm = [{ key: "rpm2", kind: "usage" as const, amount: 1, limit: 1, windowMs: 60_000, commit: true }];
    expect(await atomic.hold("r1", rpm, 60_000)).toBeNull();
    expect(await atomic.hold("r2", rpm, 60_000)).toMatchObject({ index: 0, value: 1 });
  });
});
