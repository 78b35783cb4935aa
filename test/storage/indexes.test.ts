import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { RecordMap } from "../../storage/record-map.js";
import { Collection } from "../../storage/collection.js";
import { openStore, type Store, type StoreOptions } from "../../storage/store.js";
import { SecretBox } from "../../storage/secret-box.js";
import { openRepos, type Repos } from "../../rpc/repos.js";
import type { KeyRecord } from "../../storage/repos/keys.js";
import type { WebhookDelivery } from "../../storage/repos/webhooks.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";
import { commandsOf, startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";
import { TEST_DATA_SECRET } from "../helpers/server.js";

/**
 * Indexes (docs/storage.md "Indexes"): every listed collection keeps its index in the same
 * atomic step as its records, on memory, fs and Redis alike, and a listing reads the index, so
 * its cost follows what it lists, not what else the store holds.
 */
const dirs: string[] = [];
const prefixes: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

async function optionsFor(driver: StoreOptions["STORAGE"], url = TEST_REDIS_URL, prefix = uniqueRedisPrefix()): Promise<StoreOptions> {
  const dir = await mkdtemp(join(tmpdir(), "gw-ix-"));
  dirs.push(dir);
  if (url === TEST_REDIS_URL) prefixes.push(prefix);
  return { STORAGE: driver, DATA_DIR: dir, REDIS_URL: url, REDIS_PREFIX: prefix };
}

const key = (owner: string, id: string, overrides: Partial<KeyRecord> = {}): KeyRecord => ({
  id,
  kind: "gateway",
  owner,
  userId: owner,
  name: id,
  hash: `${id}${"0".repeat(64)}`.slice(0, 64),
  hint: "sk_…",
  scopes: ["*"],
  createdAt: new Date().toISOString(),
  expiresAt: null,
  lastUsedAt: null,
  revokedAt: null,
  spendLimit: null,
  rpmLimit: null,
  tpmLimit: null,
  ...overrides,
});

const delivery = (tenantId: string, id: string, dueAt: number | null): WebhookDelivery => ({
  id,
  tenantId,
  subscriptionId: "whs_1",
  eventId: "evt_1",
  eventType: "a.b",
  body: "{}",
  status: dueAt === null ? "succeeded" : "pending",
  attempts: [],
  nextAttemptAt: dueAt === null ? null : new Date(dueAt).toISOString(),
  createdAt: new Date().toISOString(),
  updatedAt: new Date().toISOString(),
});

describe.each(["memory", "fs", "redis"] as const)("indexes on %s", (driver) => {
  let store: Store;
  let options: StoreOptions;
  beforeAll(async () => {
    options = await optionsFor(driver);
    store = await openStore(options);
  });
  afterAll(() => store.close());

  it("writes records and index entries together, and lists them in order within a range", async () => {
    await store.indexes.write([
      { op: "set", key: "rec:a", value: '{"n":1}' },
      { op: "index", index: "ix:lex", member: "b", score: 0 },
      { op: "index", index: "ix:lex", member: "a", score: 0 },
      { op: "index", index: "ix:lex", member: "c:1", score: 0 },
      { op: "index", index: "ix:lex", member: "c:2", score: 0 },
      { op: "index", index: "ix:lex", member: "d", score: 0 },
    ]);
    expect(await store.kv.getItem("rec:a")).toEqual({ n: 1 });
    expect(await store.indexes.members("ix:lex")).toEqual(["a", "b", "c:1", "c:2", "d"]);
    expect(await store.indexes.members("ix:lex", { after: "b", limit: 2 })).toEqual(["c:1", "c:2"]);
    expect(await store.indexes.members("ix:lex", { from: "c", below: "c;" })).toEqual(["c:1", "c:2"]);
    expect(await store.indexes.count("ix:lex")).toBe(5);
    await store.indexes.write([
      { op: "remove", key: "rec:a" },
      { op: "unindex", index: "ix:lex", member: "b" },
    ]);
    expect(await store.kv.getItem("rec:a")).toBeNull();
    expect(await store.indexes.members("ix:lex")).toEqual(["a", "c:1", "c:2", "d"]);
    expect(await store.indexes.members("ix:none")).toEqual([]);
  });

  it("polls a queue by score: what is due, earliest first, and moves a member when its score changes", async () => {
    await store.indexes.write([
      { op: "index", index: "q", member: "late", score: 3_000 },
      { op: "index", index: "q", member: "early", score: 1_000 },
      { op: "index", index: "q", member: "mid", score: 2_000 },
    ]);
    expect(await store.indexes.upTo("q", 2_000, 10)).toEqual([
      { member: "early", score: 1_000 },
      { member: "mid", score: 2_000 },
    ]);
    expect(await store.indexes.upTo("q", 5_000, 1)).toEqual([{ member: "early", score: 1_000 }]);
    await store.indexes.write([{ op: "index", index: "q", member: "early", score: 4_000 }]);
    expect((await store.indexes.upTo("q", 5_000, 10)).map((entry) => entry.member)).toEqual(["mid", "late", "early"]);
  });

  it("keeps a collection's listing in step with its records: put, revoke and remove", async () => {
    const repos = openRepos(store, new SecretBox(TEST_DATA_SECRET), { telemetryRetentionDays: 30 });
    await repos.keys.create(key("usr_a", "key_2"));
    await repos.keys.create(key("usr_a", "key_1"));
    await repos.keys.create(key("usr_b", "key_3"));
    expect((await repos.keys.list("usr_a")).map((record) => record.id).sort()).toEqual(["key_1", "key_2"]);
    await repos.keys.revoke((await repos.keys.get("usr_a", "key_1"))!, new Date().toISOString());
    // A revoked key leaves the listing; its record stays, marked.
    expect((await repos.keys.list("usr_a")).map((record) => record.id)).toEqual(["key_2"]);
    expect(await store.indexes.members("keys:usr_a")).toEqual(["key_2"]);
    const things = new Collection<{ id: string }>(store, "tool-plans");
    await things.put(["usr_a", "p1"], { id: "p1" });
    expect(await things.count("usr_a")).toBe(1);
    await things.remove("usr_a", "p1");
    expect(await things.count("usr_a")).toBe(0);
    await expect(new Collection(store, "users").keys()).rejects.toThrow(/not listed/);
  });

  it.skipIf(driver === "redis")(
    "lists without walking the records, with 200,000 unrelated ones in the store",
    async () => {
      const repos = openRepos(store, new SecretBox(TEST_DATA_SECRET), { telemetryRetentionDays: 30 });
      await repos.keys.create(key("usr_walk", "key_w"));
      await store.indexes.write(Array.from({ length: 200_000 }, (_, i) => ({ op: "set" as const, key: `unrelated:${i}`, value: "{}" })));
      // The memory and fs engines walk their records only in `keys` (a prefix listing): never called by a listing.
      const walk = vi.spyOn(RecordMap.prototype, "keys");
      try {
        expect((await repos.keys.list("usr_walk")).map((record) => record.id)).toEqual(["key_w"]);
        expect(await repos.webhooks.due(Date.now(), 10)).toBeDefined();
        expect(await repos.tenants.allWorkspaces({ limit: 5 })).toBeDefined();
        expect(walk).not.toHaveBeenCalled();
      } finally {
        walk.mockRestore();
      }
    },
    60_000,
  );

  it("keeps webhook deliveries in their due queue by the time of their next attempt", async () => {
    const repos = openRepos(store, new SecretBox(TEST_DATA_SECRET), { telemetryRetentionDays: 30 });
    const now = Date.now();
    await repos.webhooks.putDelivery(delivery("ten_w", "msg_late", now + 60_000));
    await repos.webhooks.putDelivery(delivery("ten_w", "msg_now", now - 10));
    await repos.webhooks.putDelivery(delivery("ten_w", "msg_done", null));
    expect(await repos.webhooks.due(now, 10)).toEqual([{ id: "msg_now", tenantId: "ten_w", dueAt: now - 10 }]);
    // An attempt's outcome moves it (or takes it out when it ended), in the same step as its record.
    await repos.webhooks.updateDelivery(delivery("ten_w", "msg_now", null));
    await repos.webhooks.updateDelivery(delivery("ten_w", "msg_late", now - 5));
    expect((await repos.webhooks.due(now, 10)).map((entry) => entry.id)).toEqual(["msg_late"]);
    expect((await repos.webhooks.listDeliveries("ten_w")).map((d) => d.id)).toEqual(["msg_done", "msg_late", "msg_now"]);
  });
});

describe("indexes of data written before them", () => {
  it("are built once from the records at the first start on Redis, and the old due records become the queue", async () => {
    const options = await optionsFor("redis");
    const redis = new Redis(TEST_REDIS_URL);
    const p = options.REDIS_PREFIX;
    // What the previous version left: records only, and one due record per pending delivery.
    await redis.set(`${p}:kv:keys:usr_old:key_a`, JSON.stringify(key("usr_old", "key_a")));
    await redis.set(`${p}:kv:keys:usr_old:key_b`, JSON.stringify(key("usr_old", "key_b")));
    await redis.set(`${p}:kv:webhook-deliveries:ten_old:msg_1`, JSON.stringify(delivery("ten_old", "msg_1", 1_000)));
    await redis.set(`${p}:kv:webhook-due:msg_1`, JSON.stringify({ id: "msg_1", tenantId: "ten_old", dueAt: 1_000 }));
    await redis.set(`${p}:kv:users:usr_old`, JSON.stringify({ id: "usr_old" }));
    let store = await openStore(options);
    try {
      const repos = openRepos(store, new SecretBox(TEST_DATA_SECRET), { telemetryRetentionDays: 30 });
      expect((await repos.keys.list("usr_old")).map((record) => record.id)).toEqual(["key_a", "key_b"]);
      expect(await repos.webhooks.due(2_000, 10)).toEqual([{ id: "msg_1", tenantId: "ten_old", dueAt: 1_000 }]);
      expect(await redis.exists(`${p}:kv:webhook-due:msg_1`)).toBe(0);
      expect(await redis.get(`${p}:layout`)).toBe("indexes-1");
    } finally {
      await store.close();
    }
    // Once: a record written without its index after the build stays unlisted (the marker is there).
    await redis.set(`${p}:kv:keys:usr_old:key_c`, JSON.stringify(key("usr_old", "key_c")));
    store = await openStore(options);
    try {
      expect(await store.indexes.members("keys:usr_old")).toEqual(["key_a", "key_b"]);
    } finally {
      await store.close();
      redis.disconnect();
    }
  });
});

/**
 * The cost of every listing, in Redis commands, with and without 200,000 unrelated keys under
 * the same prefix: unchanged. On a redis-server of this file's own (DEBUG POPULATE fills it
 * at once; INFO commandstats counts what each listing sent).
 */
describe("listing cost does not follow the keyspace", () => {
  let redis: PrivateRedis;
  let store: Store;
  let repos: Repos;
  const now = Date.now();

  beforeAll(async () => {
    redis = await startPrivateRedis();
    store = await openStore(await optionsFor("redis", redis.url, "gw"));
    repos = openRepos(store, new SecretBox(TEST_DATA_SECRET), { telemetryRetentionDays: 30 });
    for (const id of ["key_1", "key_2", "key_3"]) await repos.keys.create(key("usr_1", id));
    const at = new Date().toISOString();
    await repos.tenants.putWorkspace({ id: "ws_1", tenantId: "ten_1", name: "w", status: "active", createdAt: at, updatedAt: at });
    await repos.members.put({ tenantId: "ten_1", userId: "usr_1", role: "owner", addedBy: "usr_1", addedAt: at, updatedAt: at });
    for (const id of ["agt_1", "agt_2"]) {
      await repos.agents.put({
        id,
        name: id,
        model: "m",
        tools: [],
        description: "",
        config: { maxSteps: 1 },
        tenantId: "ten_1",
        ownerId: "usr_1",
        createdAt: at,
        updatedAt: at,
      });
    }
    for (const id of ["whs_1", "whs_2"]) {
      await repos.webhooks.putSubscription({
        id,
        tenantId: "ten_1",
        url: "https://example.com",
        filter: ["*"],
        description: "",
        enabled: true,
        secret: "x",
        createdAt: at,
        updatedAt: at,
      });
    }
    await repos.webhooks.putDelivery(delivery("ten_1", "msg_1", now - 1));
    await repos.webhooks.putDelivery(delivery("ten_1", "msg_2", now + 60_000));
    await repos.usage.record("ten_1", { day: "2026-01-02", surface: "platform", model: "m" }, { requests: 1 });
  }, 30_000);
  afterAll(async () => {
    await store?.close();
    await redis?.stop();
  });

  const listings: [string, () => Promise<unknown>][] = [
    ["a user's keys", () => repos.keys.list("usr_1")],
    ["a tenant's workspaces", () => repos.tenants.workspacesOf("ten_1")],
    ["every workspace, a page", () => repos.tenants.allWorkspaces({ limit: 10 })],
    ["a tenant's members", () => repos.members.list("ten_1")],
    ["a user's tenants", () => repos.members.tenantIdsOf("usr_1")],
    ["an owner's agents", () => repos.agents.list("usr_1")],
    ["a tenant's webhook subscriptions", () => repos.webhooks.listSubscriptions("ten_1")],
    ["a subscription count", () => repos.webhooks.countSubscriptions("ten_1")],
    ["a tenant's deliveries", () => repos.webhooks.listDeliveries("ten_1")],
    ["due deliveries (one poll)", () => repos.webhooks.due(now, 100)],
    ["due fan-outs (one poll)", () => repos.webhooks.fanOutsDue(now, 100)],
    ["a tenant's usage rows", () => repos.usage.rows("ten_1", "2026-01-01", "2026-01-31")],
    ["a workspace's artifacts", () => repos.artifacts.page("ws_1", 10)],
    ["the model registry", () => repos.modelRegistry.list()],
    ["a user's tool plans", () => repos.toolPlans.list("usr_1")],
    ["releases", () => repos.releases.list()],
  ];

  it("sends the same commands for every listing with 200,000 unrelated keys as without, and never SCAN or KEYS", async () => {
    const before: Record<string, Record<string, number>> = {};
    for (const [name, list] of listings) before[name] = await commandsOf(redis.admin, list);
    await redis.admin.call("DEBUG", "POPULATE", "200000", "gw:kv:unrelated");
    expect(await redis.admin.dbsize()).toBeGreaterThan(200_000);
    for (const [name, list] of listings) {
      const after = await commandsOf(redis.admin, list);
      expect(after, name).toEqual(before[name]);
      expect(
        Object.keys(after).filter((command) => /^(scan|keys)/.test(command)),
        name,
      ).toEqual([]);
    }
    // What was listed is still right.
    expect((await repos.keys.list("usr_1")).map((record) => record.id)).toEqual(["key_1", "key_2", "key_3"]);
    expect((await repos.webhooks.due(now, 100)).map((entry) => entry.id)).toEqual(["msg_1"]);
  }, 60_000);
});
