import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from "vitest";
import { openStore, type Store, type StoreOptions } from "../../storage/store.js";
import { QuotasRepo } from "../../storage/repos/quotas.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";

/**
 * The leased places behind the VM socket, VM tool and stream quotas (storage/atomic.ts
 * claimPlace, docs/quotas.md), on every driver: the in-process one and the real Redis.
 */
const dirs: string[] = [];
const prefixes: string[] = [];

async function optionsFor(driver: StoreOptions["STORAGE"]): Promise<StoreOptions> {
  const dir = await mkdtemp(join(tmpdir(), "gw-places-"));
  dirs.push(dir);
  const prefix = uniqueRedisPrefix();
  prefixes.push(prefix);
  return { STORAGE: driver, DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix };
}

afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(["memory", "fs", "redis"] as const)("quota places on %s", (driver) => {
  let store: Store;
  let quotas: QuotasRepo;

  beforeEach(async () => {
    store = await openStore(await optionsFor(driver));
    quotas = new QuotasRepo(store);
  });
  afterEach(async () => {
    await store.close();
  });

  it("claims places in several sets all or none, so concurrent claims fill the tightest set exactly", async () => {
    // Three sets as a stream's key, user and tenant: the user's (4) is the tightest.
    const sets = (i: number) => [
      { quota: "streams", scope: `key${i % 2}`, limit: 3 },
      { quota: "streams_per_user", scope: "u1", limit: 4 },
      { quota: "streams_per_tenant", scope: "t1", limit: 10 },
    ];
    const claims = await Promise.all(
      Array.from({ length: 20 }, (_, i) => quotas.claimAll(sets(i), { holder: `s${i}`, token: `s${i}`, weight: 1 }, 60_000)),
    );
    expect(claims.filter((claim) => claim.taken)).toHaveLength(4);
    // Nothing taken for a refused claim: the sets hold exactly the admitted ones.
    expect(await quotas.count("streams_per_user", "u1")).toEqual({ weight: 4, holders: 4 });
    expect(await quotas.count("streams_per_tenant", "t1")).toEqual({ weight: 4, holders: 4 });
    const keys = (await quotas.count("streams", "key0")).holders + (await quotas.count("streams", "key1")).holders;
    expect(keys).toBe(4);
    // The first full set in order is the one named.
    const refused = await quotas.claimAll(sets(0), { holder: "late", token: "late", weight: 1 }, 60_000);
    expect(refused.taken).toBe(false);
    if (!refused.taken)
      expect([refused.refusedAt, refused.others]).toEqual((await quotas.count("streams", "key0")).holders === 3 ? [0, 3] : [1, 4]);
    // A place given back in every set makes room again.
    const admitted = claims.flatMap((claim, i) => (claim.taken ? [i] : []));
    const first = admitted[0]!;
    for (const { quota, scope } of sets(first)) await quotas.release(quota, scope, `s${first}`, `s${first}`);
    expect((await quotas.claimAll(sets(first), { holder: "next", token: "next", weight: 1 }, 60_000)).taken).toBe(true);
  });

  it("never lets concurrent claims pass the limit, and a released place is free again", async () => {
    const claims = await Promise.all(
      Array.from({ length: 12 }, (_, i) => quotas.claim("sockets", "ten_a", { holder: `vm${i}`, token: `t${i}`, weight: 1 }, 5, 60_000)),
    );
    expect(claims.filter((claim) => claim.taken)).toHaveLength(5);
    const refused = claims.find((claim) => !claim.taken)!;
    expect(refused).toEqual({ taken: false, others: 5, own: 0 });
    expect(await quotas.count("sockets", "ten_a")).toEqual({ weight: 5, holders: 5 });
    // Another scope is not affected.
    expect((await quotas.claim("sockets", "ten_b", { holder: "vm0", token: "x", weight: 1 }, 5, 60_000)).taken).toBe(true);

    const holder = claims.findIndex((claim) => claim.taken);
    // A release with a token that no longer owns the place changes nothing.
    await quotas.release("sockets", "ten_a", `vm${holder}`, "stale");
    expect((await quotas.count("sockets", "ten_a")).holders).toBe(5);
    await quotas.release("sockets", "ten_a", `vm${holder}`, `t${holder}`);
    expect((await quotas.count("sockets", "ten_a")).holders).toBe(4);
    expect((await quotas.claim("sockets", "ten_a", { holder: "late", token: "l", weight: 1 }, 5, 60_000)).taken).toBe(true);
  });

  it("lets a holder keep its place at the limit (a VM reconnecting) and weighs places", async () => {
    expect((await quotas.claim("tools", "ten_a", { holder: "vm1", token: "c1", weight: 3 }, 5, 60_000)).taken).toBe(true);
    expect(await quotas.claim("tools", "ten_a", { holder: "vm2", token: "c2", weight: 3 }, 5, 60_000)).toEqual({
      taken: false,
      others: 3,
      own: 0,
    });
    expect(await quotas.claim("tools", "ten_a", { holder: "vm2", token: "c2", weight: 2 }, 5, 60_000)).toEqual({
      taken: true,
      others: 3,
      own: 0,
    });
    // vm1 announces more than fits: refused, its three stay.
    expect(await quotas.claim("tools", "ten_a", { holder: "vm1", token: "c1", weight: 4 }, 5, 60_000)).toEqual({
      taken: false,
      others: 2,
      own: 3,
    });
    // vm1 reconnects (a new token): no more than it had is always taken, and the old token's release is ignored.
    expect((await quotas.claim("tools", "ten_a", { holder: "vm1", token: "c1b", weight: 3 }, 5, 60_000)).taken).toBe(true);
    await quotas.release("tools", "ten_a", "vm1", "c1");
    expect(await quotas.count("tools", "ten_a")).toEqual({ weight: 5, holders: 2 });
  });

  it("drops places whose lease ran out, keeps renewed ones, and takes back a lost place on renewal", async () => {
    // Every driver reads the lease clock from Date.now() (Redis gets it as an argument): only the
    // date is faked and moved on; timers and sockets stay real.
    vi.useFakeTimers({ toFake: ["Date"] });
    onTestFinished(() => void vi.useRealTimers());
    const elapse = (ms: number) => vi.setSystemTime(Date.now() + ms);
    await quotas.claim("streams", "key_1", { holder: "s1", token: "s1", weight: 1 }, 2, 150);
    await quotas.claim("streams", "key_1", { holder: "s2", token: "s2", weight: 1 }, 2, 150);
    expect((await quotas.claim("streams", "key_1", { holder: "s3", token: "s3", weight: 1 }, 2, 150)).taken).toBe(false);
    elapse(80);
    await quotas.renew("streams", "key_1", [{ holder: "s1", token: "s1", weight: 1 }], 10_000);
    elapse(69);
    // One millisecond before s2's lease ends it still holds its place.
    expect(await quotas.count("streams", "key_1")).toEqual({ weight: 2, holders: 2 });
    elapse(1);
    // s2's lease ended (its process died): its place is free; s1 was renewed.
    expect(await quotas.count("streams", "key_1")).toEqual({ weight: 1, holders: 1 });
    expect((await quotas.claim("streams", "key_1", { holder: "s3", token: "s3", weight: 1 }, 2, 10_000)).taken).toBe(true);
    // A renewal of a place that is gone takes it again; a renewal under another token does not.
    await quotas.renew("streams", "key_1", [{ holder: "s2", token: "s2", weight: 1 }], 10_000);
    expect((await quotas.count("streams", "key_1")).holders).toBe(3);
    await quotas.renew("streams", "key_1", [{ holder: "s3", token: "other", weight: 5 }], 10_000);
    expect(await quotas.count("streams", "key_1")).toEqual({ weight: 3, holders: 3 });
  });

  it("lets one writer at a time count and create under a quota's lock", async () => {
    let count = 0;
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        quotas.withLock("things", "ten_a", async () => {
          const seen = count;
          await sleep(2);
          if (seen >= 4) return false;
          count = seen + 1;
          return true;
        }),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(4);
    expect(count).toBe(4);
  });
});
