import { afterEach, describe, expect, it, vi } from "vitest";
import { LocalAtomic, type AtomicRecords } from "../../storage/atomic.js";
import type { Change } from "../../storage/record-map.js";

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

  it("refuses a request whose known cost (its prompt) passes what remains, and holds one that fits capped", async () => {
    const atomic = new LocalAtomic();
    await atomic.adjust("credits", 20);
    // A 150-credit prompt on a balance of 20: refused, nothing held.
    expect(await atomic.hold("big", [{ key: "credits", kind: "balance", amount: 160, known: 150 }], 60_000)).toMatchObject({
      index: 0,
      value: 20,
      held: 0,
    });
    expect(await atomic.account("credits")).toEqual({ value: 20, held: 0, ttlMs: 0 });
    // A prompt of 15 fits: held capped at the 20 that remain (its output may pass them, by at most 5 + its output).
    expect(await atomic.hold("fits", [{ key: "credits", kind: "balance", amount: 40, known: 15 }], 60_000)).toBeNull();
    expect(await atomic.account("credits")).toMatchObject({ value: 20, held: 20, capped: "fits" });
    // A plan with 192 tokens left refuses a 150,000-token prompt.
    await atomic.hold("used", [{ key: "plan", kind: "usage", amount: 99_808, limit: 100_000 }], 60_000);
    await atomic.settle("used", [{ key: "plan", delta: 99_808 }]);
    expect(
      await atomic.hold("huge", [{ key: "plan", kind: "usage", amount: 154_096, known: 150_000, limit: 100_000 }], 60_000),
    ).toMatchObject({
      index: 0,
      value: 99_808,
    });
    expect(await atomic.hold("small", [{ key: "plan", kind: "usage", amount: 4_196, known: 100, limit: 100_000 }], 60_000)).toBeNull();
  });
});

describe("LocalAtomic on durable records (fs)", () => {
  /** Records that keep what was written and how: each call is one journal line on fs. */
  function recording() {
    const data = new Map<string, string>();
    const lines: string[][] = [];
    const records: AtomicRecords = {
      get: (key) => data.get(key),
      set: async (key, value) => {
        data.set(key, value);
        lines.push([key]);
      },
      remove: async (key) => {
        data.delete(key);
        lines.push([key]);
      },
      write: async (changes: readonly Change[]) => {
        for (const change of changes) if (change.op === "set") data.set(change.key, change.value);
        lines.push(changes.map((change) => (change.op === "set" || change.op === "remove" ? change.key : "")));
      },
    };
    return { records, lines, data };
  }

  it("writes a settlement's accounts and metering counters as one record: on disk together or not at all", async () => {
    const { records, lines } = recording();
    const atomic = new LocalAtomic(records);
    await atomic.adjust("credits:ws", 1_000);
    lines.length = 0;
    await atomic.hold(
      "h",
      [
        { key: "credits:ws", kind: "balance", amount: 100, known: 10 },
        { key: "plan-usage:u", kind: "usage", amount: 50, known: 5, limit: 1_000, windowMs: 60_000 },
      ],
      60_000,
    );
    // Placing a hold writes nothing (holds live in the process).
    expect(lines).toEqual([]);
    await atomic.settle(
      "h",
      [
        { key: "credits:ws", delta: -30 },
        { key: "plan-usage:u", delta: 20, windowMs: 60_000 },
      ],
      [["usage:requests", 1]],
    );
    expect(lines).toEqual([["atomic:usage:requests", "atomic:credits:ws", "atomic:plan-usage:u"]]);
    // A fresh process over the same records reads what was settled.
    const after = new LocalAtomic(records);
    expect(await after.account("credits:ws")).toMatchObject({ value: 970, held: 0 });
    expect(await after.account("plan-usage:u")).toMatchObject({ value: 20, held: 0 });
    expect(await after.balance("usage:requests")).toBe(1);
  });
});
