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
    expect(await atomic.hold("h2", [{ key: "credits", kind: "balance", amount: 51 }], 60_000)).toMatchObject({ index: 0, value: 100, held: 50 });
    await atomic.settle("h1", [{ key: "credits", delta: -20 }]);
    expect(await atomic.account("credits")).toMatchObject({ value: 80, held: 0 });
  });

  it("releases holds whose lease ran out, earliest first, on the next use of the account", async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const atomic = new LocalAtomic();
    await atomic.adjust("credits", 100);
    await atomic.hold("short", [{ key: "credits", kind: "balance", amount: 40 }], 1_000);
    await atomic.hold("long", [{ key: "credits", kind: "balance", amount: 40 }], 10_000);
    expect(await atomic.hold("third", [{ key: "credits", kind: "balance", amount: 40 }], 10_000)).not.toBeNull();
    vi.advanceTimersByTime(1_000);
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
    expect(await atomic.hold("b", lines, 60_000)).toMatchObject({ index: 1, value: 0, held: 10 });
    expect(await atomic.account("credits")).toMatchObject({ value: 100, held: 10 });
    expect(await atomic.account("rpm")).toMatchObject({ value: 1, held: 0 });
    await atomic.settle("a", [
      { key: "credits", delta: -7 },
      { key: "spend", delta: 7 },
    ]);
    expect(await atomic.account("spend")).toMatchObject({ value: 7, held: 0 });
    expect(await atomic.hold("b", lines, 60_000)).toBeNull();
    expect(await atomic.account("rpm")).toMatchObject({ value: 2 });
  });
});
