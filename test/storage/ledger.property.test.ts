import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { openStore, type Store, type StoreOptions } from "../../storage/store.js";
import { LedgerRepo, type LedgerAccount } from "../../storage/repos/ledger.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";

/**
 * The ledger's rules (DESIGN "Money"), for any interleaving of grant, hold, settle, release
 * and lease expiry, on every driver: `available + held = granted − settled` (the stored value
 * is granted − settled), a hold is admitted exactly when the model admits it, no hold ever
 * takes the available balance below zero, and a hold spans its accounts all-or-nothing.
 */

const LEASE = 10_000;
const SPEND_CAP = 400;

type Command =
  | { op: "grant"; amount: number }
  | { op: "hold"; id: number; amount: number }
  | { op: "settle"; id: number; fraction: number }
  | { op: "release"; id: number }
  | { op: "advance"; ms: number }
  | { op: "burst"; amounts: number[] };

const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ op: fc.constant("grant" as const), amount: fc.integer({ min: 0, max: 300 }) }),
  fc.record({ op: fc.constant("hold" as const), id: fc.integer({ min: 0, max: 7 }), amount: fc.integer({ min: 0, max: 200 }) }),
  fc.record({ op: fc.constant("settle" as const), id: fc.integer({ min: 0, max: 7 }), fraction: fc.double({ min: 0, max: 1, noNaN: true }) }),
  fc.record({ op: fc.constant("release" as const), id: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ op: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 8_000 }) }),
  fc.record({ op: fc.constant("burst" as const), amounts: fc.array(fc.integer({ min: 1, max: 120 }), { minLength: 2, maxLength: 8 }) }),
);

interface ModelHold {
  amount: number;
  expiresAt: number;
}

class Model {
  credits = 0;
  spend = 0;
  holds = new Map<string, ModelHold>();
  constructor(public now: number) {}
  live() {
    return [...this.holds.entries()].filter(([, hold]) => hold.expiresAt > this.now);
  }
  held() {
    return this.live().reduce((sum, [, hold]) => sum + hold.amount, 0);
  }
  fits(amount: number) {
    return this.credits - this.held() - amount >= 0 && this.spend + this.held() + amount <= SPEND_CAP;
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
  it("holds and settles zero amounts (a free request) without error", async () => {
    const store = await open(driver);
    try {
      const ledger = new LedgerRepo(store);
      const credits = ledger.credits("ws_zero");
      expect(await ledger.hold("h_zero", [{ account: credits, amount: 0 }], LEASE)).toBeNull();
      await ledger.settle("h_zero", [{ account: credits, used: 0 }]);
      expect(await ledger.state(credits)).toMatchObject({ value: 0, held: 0 });
    } finally {
      await store.close();
    }
  });

  it("keeps available + held = granted − settled and never admits past the balance", async () => {
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
          const place = (id: string, amount: number) =>
            ledger.hold(id, [{ account: credits, amount }, { account: spend, amount, limit: SPEND_CAP }], LEASE);
          try {
            for (const cmd of commands) {
              switch (cmd.op) {
                case "grant":
                  await store.atomic.adjust(credits.key, cmd.amount);
                  model.credits += cmd.amount;
                  break;
                case "hold": {
                  const id = holdId(cmd.id);
                  if (model.holds.has(id)) break; // one request, one hold
                  const expected = model.fits(cmd.amount);
                  const refused = await place(id, cmd.amount);
                  expect(refused === null).toBe(expected);
                  if (expected) model.holds.set(id, { amount: cmd.amount, expiresAt: model.now + LEASE });
                  break;
                }
                case "settle":
                case "release": {
                  const id = holdId(cmd.id);
                  const hold = model.holds.get(id);
                  if (!hold) break; // settled exactly once: the caller guards a second call
                  const used = cmd.op === "settle" ? Math.floor(hold.amount * cmd.fraction) : 0;
                  await ledger.settle(id, [{ account: credits, used }, { account: spend, used }]);
                  model.holds.delete(id);
                  model.credits -= used;
                  model.spend += used;
                  break;
                }
                case "advance":
                  model.now += cmd.ms;
                  vi.setSystemTime(model.now);
                  break;
                case "burst": {
                  // Concurrent holds: whatever order they run in, the admitted ones fit together
                  // and every refused one did not fit beside them.
                  const available = Math.min(model.credits - model.held(), SPEND_CAP - model.spend - model.held());
                  const ids = cmd.amounts.map((_, i) => `b${run}_${model.holds.size}_${i}_${Math.random()}`);
                  const results = await Promise.all(cmd.amounts.map((amount, i) => place(ids[i]!, amount)));
                  const admitted = cmd.amounts.filter((_, i) => results[i] === null);
                  const total = admitted.reduce((a, b) => a + b, 0);
                  expect(total).toBeLessThanOrEqual(Math.max(0, available));
                  cmd.amounts.forEach((amount, i) => {
                    if (results[i] !== null) expect(amount).toBeGreaterThan(available - total);
                    else model.holds.set(ids[i]!, { amount, expiresAt: model.now + LEASE });
                  });
                  break;
                }
              }
              const [c, s] = await Promise.all([ledger.state(credits), ledger.state(spend)]);
              const held = model.held();
              expect(c).toMatchObject({ value: model.credits, held });
              expect(s).toMatchObject({ value: model.spend, held });
              // available + held = granted − settled, and available never below zero while holds are live
              expect(c.value - c.held + c.held).toBe(model.credits);
              if (held > 0) expect(c.value - c.held).toBeGreaterThanOrEqual(0);
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
