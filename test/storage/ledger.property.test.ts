import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { openStore, type Store, type StoreOptions } from "../../storage/store.js";
import { LedgerRepo, type LedgerAccount } from "../../storage/repos/ledger.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";

/**
 * The ledger's rules (docs/architecture.md "Money", storage/admission.ts), for any interleaving of grant,
 * hold, settle, release and lease expiry, on every driver, with a model of the rule written
 * out here:
 * - `available + held = granted − settled` (the stored value is granted − settled);
 * - what the rule allows is served: a hold is admitted exactly when the model admits it (what
 *   remains is above zero and the request's known cost, its prompt, fits in it; a worst case
 *   that does not fit whole is held capped at what remains, unless a capped hold is already in
 *   flight), with exactly the model's amount;
 * - nothing beyond the bound passes: settlements charge up to the worst case, yet no account
 *   ends further past its limit (below zero for credits) than the largest excess of a capped
 *   hold over its amount — one request's excess, which is never more than one request's output
 *   (its worst case less its prompt);
 * - a hold spans its accounts all-or-nothing.
 */

const LEASE = 10_000;
const SPEND_CAP = 400;

type Command =
  | { op: "grant"; amount: number }
  | { op: "hold"; id: number; amount: number; prompt: number }
  | { op: "settle"; id: number; fraction: number }
  | { op: "release"; id: number }
  | { op: "advance"; ms: number }
  | { op: "burst"; amounts: number[] };

const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ op: fc.constant("grant" as const), amount: fc.integer({ min: 0, max: 300 }) }),
  fc.record({
    op: fc.constant("hold" as const),
    id: fc.integer({ min: 0, max: 7 }),
    amount: fc.integer({ min: 0, max: 200 }),
    prompt: fc.double({ min: 0, max: 1, noNaN: true }),
  }),
  fc.record({
    op: fc.constant("settle" as const),
    id: fc.integer({ min: 0, max: 7 }),
    fraction: fc.double({ min: 0, max: 1, noNaN: true }),
  }),
  fc.record({ op: fc.constant("release" as const), id: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ op: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 8_000 }) }),
  fc.record({ op: fc.constant("burst" as const), amounts: fc.array(fc.integer({ min: 1, max: 120 }), { minLength: 2, maxLength: 8 }) }),
);

/** One account of the model: its value, and per live hold the amount held and the worst case. */
class ModelAccount {
  value = 0;
  holds = new Map<string, { amount: number; worst: number; expiresAt: number }>();
  /** The largest excess of a capped hold over its amount admitted so far (the bound). */
  largestExcess = 0;
  /** The largest output (worst case less prompt) of a request admitted so far: the bound's bound. */
  largestOutput = 0;
  /** Usage settled on holds whose lease had run out (a crashed request): outside the bound. */
  late = 0;
  constructor(
    readonly kind: "balance" | "usage",
    readonly limit: number,
  ) {}
  live(now: number) {
    return [...this.holds.entries()].filter(([, hold]) => hold.expiresAt > now);
  }
  held(now: number) {
    return this.live(now).reduce((sum, [, hold]) => sum + hold.amount, 0);
  }
  capped(now: number) {
    return this.live(now).find(([, hold]) => hold.amount < hold.worst)?.[0];
  }
  remaining(now: number) {
    return this.kind === "balance" ? this.value - this.held(now) - this.limit : this.limit - this.value - this.held(now);
  }
  /** The rule, written independently of storage/admission.ts: the amount to hold, or null. */
  admit(worst: number, known: number, now: number): number | null {
    const remaining = this.remaining(now);
    if (remaining <= 0) return null;
    if (known > remaining) return null;
    if (worst <= remaining) return worst;
    return this.capped(now) === undefined ? remaining : null;
  }
  /** How far past its limit the account is (0 when within it). */
  overshoot() {
    return Math.max(0, this.kind === "balance" ? this.limit - this.value : this.value - this.limit);
  }
}

class Model {
  credits = new ModelAccount("balance", 0);
  spend = new ModelAccount("usage", SPEND_CAP);
  constructor(public now: number) {}
  /** Both accounts admit, or the hold is refused on both. */
  admit(worst: number, known: number): [number, number] | null {
    const credits = this.credits.admit(worst, known, this.now);
    const spend = credits === null ? null : this.spend.admit(worst, known, this.now);
    return credits === null || spend === null ? null : [credits, spend];
  }
  place(id: string, worst: number, known: number, [credits, spend]: [number, number]) {
    const expiresAt = this.now + LEASE;
    this.credits.holds.set(id, { amount: credits, worst, expiresAt });
    this.spend.holds.set(id, { amount: spend, worst, expiresAt });
    for (const [account, amount] of [
      [this.credits, credits],
      [this.spend, spend],
    ] as const) {
      account.largestExcess = Math.max(account.largestExcess, worst - amount);
      account.largestOutput = Math.max(account.largestOutput, worst - known);
    }
  }
}

const dirs: string[] = [];
const prefixes: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});
afterEach(() => vi.useRealTimers());

async function open(driver: StoreOptions["STORAGE"]): Promise<Store> {
  const dir = await mkdtemp(join(tmpdir(), "gw-ledger-"));
  dirs.push(dir);
  const prefix = uniqueRedisPrefix();
  prefixes.push(prefix);
  return openStore({ STORAGE: driver, DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix });
}

describe.each([
  ["memory", 150],
  ["fs", 25],
  ["redis", 80],
] as const)("ledger on %s", (driver, numRuns) => {
  it("holds and settles zero amounts (a free request) while the balance is positive, and refuses them at zero", async () => {
    const store = await open(driver);
    try {
      const ledger = new LedgerRepo(store);
      const credits = ledger.credits("ws_zero");
      expect(await ledger.hold("h_none", [{ account: credits, amount: 0 }], LEASE)).toMatchObject({ index: 0, value: 0, held: 0 });
      await store.atomic.adjust(credits.key, 5);
      expect(await ledger.hold("h_zero", [{ account: credits, amount: 0 }], LEASE)).toBeNull();
      await ledger.settle("h_zero", [{ account: credits, used: 0 }]);
      expect(await ledger.state(credits)).toMatchObject({ value: 5, held: 0 });
    } finally {
      await store.close();
    }
  });

  it("counts a hold placed again under the same id once, at its new amount", async () => {
    const store = await open(driver);
    try {
      const ledger = new LedgerRepo(store);
      const credits = ledger.credits("ws_again");
      await store.atomic.adjust(credits.key, 100);
      expect(await ledger.hold("h_again", [{ account: credits, amount: 30 }], LEASE)).toBeNull();
      expect(await ledger.hold("h_again", [{ account: credits, amount: 20 }], LEASE)).toBeNull();
      expect(await ledger.state(credits)).toMatchObject({ value: 100, held: 20 });
      await ledger.settle("h_again", [{ account: credits, used: 15 }]);
      expect(await ledger.state(credits)).toMatchObject({ value: 85, held: 0 });
    } finally {
      await store.close();
    }
  });

  it("keeps available + held = granted − settled, admits exactly what the rule admits, and never passes the bound", async () => {
    const store = await open(driver);
    const ledger = new LedgerRepo(store);
    let run = 0;
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 30 }), async (commands) => {
          run += 1;
          const start = Date.UTC(2030, 0, 1) + run * 10_000_000;
          vi.useFakeTimers({ toFake: ["Date"], now: start });
          const credits: LedgerAccount = ledger.credits(`ws_${driver}_${run}`);
          const spend: LedgerAccount = ledger.keySpend(`key_${driver}_${run}`);
          const model = new Model(start);
          const holdId = (id: number) => `h${run}_${id}`;
          const place = (id: string, amount: number, known: number) =>
            ledger.hold(
              id,
              [
                { account: credits, amount, known },
                { account: spend, amount, known, limit: SPEND_CAP },
              ],
              LEASE,
            );
          try {
            for (const cmd of commands) {
              switch (cmd.op) {
                case "grant":
                  await store.atomic.adjust(credits.key, cmd.amount);
                  model.credits.value += cmd.amount;
                  break;
                case "hold": {
                  const id = holdId(cmd.id);
                  if (model.credits.holds.has(id)) break; // one request, one hold
                  const known = Math.floor(cmd.amount * cmd.prompt);
                  const expected = model.admit(cmd.amount, known);
                  const refused = await place(id, cmd.amount, known);
                  expect(refused === null).toBe(expected !== null);
                  if (expected) model.place(id, cmd.amount, known, expected);
                  break;
                }
                case "settle":
                case "release": {
                  const id = holdId(cmd.id);
                  const held = model.credits.holds.get(id);
                  if (!held) break; // settled exactly once: the caller guards a second call
                  // A settlement charges the metered cost, anywhere up to the worst case: past a capped hold.
                  const used = cmd.op === "settle" ? Math.floor(held.worst * cmd.fraction) : 0;
                  await ledger.settle(id, [
                    { account: credits, used },
                    { account: spend, used },
                  ]);
                  for (const account of [model.credits, model.spend]) {
                    if (account.holds.get(id)!.expiresAt <= model.now) account.late += used;
                    account.holds.delete(id);
                  }
                  model.credits.value -= used;
                  model.spend.value += used;
                  break;
                }
                case "advance":
                  model.now += cmd.ms;
                  vi.setSystemTime(model.now);
                  break;
                case "burst": {
                  // Concurrent holds, in whatever order they run: each admitted one took what
                  // remained or less, and each refused one would still be refused beside them all.
                  const before = [model.credits.remaining(model.now), model.spend.remaining(model.now)];
                  const ids = cmd.amounts.map((_, i) => `b${run}_${model.credits.holds.size}_${i}_${Math.random()}`);
                  // Each request's prompt is half its worst case.
                  const knownOf = (amount: number) => Math.floor(amount / 2);
                  const results = await Promise.all(cmd.amounts.map((amount, i) => place(ids[i]!, amount, knownOf(amount))));
                  const [c, s] = await Promise.all([ledger.state(credits), ledger.state(spend)]);
                  const admitted = cmd.amounts.map((amount, i) => ({ amount, id: ids[i]! })).filter((_, i) => results[i] === null);
                  const worstTotal = admitted.reduce((sum, hold) => sum + hold.amount, 0);
                  const cuts: number[] = [];
                  for (const [account, state, remainingBefore] of [
                    [model.credits, c, before[0]!],
                    [model.spend, s, before[1]!],
                  ] as const) {
                    const heldNow = state.held - account.held(model.now);
                    // Held no more than remained, so nothing in flight takes an account below zero remaining.
                    if (admitted.length) expect(heldNow).toBeLessThanOrEqual(Math.max(0, remainingBefore));
                    // At most one capped hold in flight, and a new one only when some worst case was cut.
                    const cut = worstTotal - heldNow;
                    expect(cut).toBeGreaterThanOrEqual(0);
                    const cappedBefore = account.capped(model.now);
                    if (cut > 0) {
                      expect(cappedBefore).toBeUndefined();
                      expect(admitted.map((hold) => hold.id)).toContain(state.capped);
                    } else {
                      expect(state.capped).toBe(cappedBefore);
                    }
                    cuts.push(cut);
                  }
                  // Record the admitted holds with the amount each account holds for them.
                  for (const hold of admitted) {
                    const amounts = [c, s].map((state, index) => (state.capped === hold.id ? hold.amount - cuts[index]! : hold.amount)) as [
                      number,
                      number,
                    ];
                    model.place(hold.id, hold.amount, knownOf(hold.amount), amounts);
                  }
                  const remainingAfter = [model.credits.remaining(model.now), model.spend.remaining(model.now)];
                  cmd.amounts.forEach((amount, i) => {
                    if (results[i] === null) return;
                    const refusedOn = results[i]!.index;
                    const account = refusedOn === 0 ? model.credits : model.spend;
                    const remaining = remainingAfter[refusedOn]!;
                    expect(
                      remaining <= 0 || knownOf(amount) > remaining || (amount > remaining && account.capped(model.now) !== undefined),
                    ).toBe(true);
                  });
                  break;
                }
              }
              const [c, s] = await Promise.all([ledger.state(credits), ledger.state(spend)]);
              expect(c).toMatchObject({ value: model.credits.value, held: model.credits.held(model.now) });
              expect(s).toMatchObject({ value: model.spend.value, held: model.spend.held(model.now) });
              expect(c.capped).toBe(model.credits.capped(model.now));
              expect(s.capped).toBe(model.spend.capped(model.now));
              // available + held = granted − settled
              expect(c.value - c.held + c.held).toBe(model.credits.value);
              // The bound: no account past its limit by more than one capped hold's excess
              // (usage of a hold whose lease ran out, a crashed request, aside).
              for (const account of [model.credits, model.spend]) {
                expect(account.overshoot()).toBeLessThanOrEqual(account.largestExcess + account.late);
                // …and that excess is at most one request's output: a capped hold covers its prompt.
                expect(account.largestExcess).toBeLessThanOrEqual(account.largestOutput);
                // …and in flight, what remains is never below zero by more than that either.
                if (account.live(model.now).length)
                  expect(-account.remaining(model.now)).toBeLessThanOrEqual(account.largestExcess + account.late);
              }
            }
          } finally {
            vi.useRealTimers();
          }
        }),
        { numRuns },
      );
    } finally {
      await store.close();
    }
  }, 120_000);
});
