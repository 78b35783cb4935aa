import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { openStore, type Store, type StoreOptions } from "../../storage/store.js";
import { Collection } from "../../storage/collection.js";
import { UsersRepo } from "../../storage/repos/users.js";
import { KeysRepo, type KeyRecord } from "../../storage/repos/keys.js";
import { CreditsRepo } from "../../storage/repos/credits.js";
import { eventually } from "../helpers/eventually.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";

const dirs: string[] = [];
const prefixes: string[] = [];

async function optionsFor(driver: StoreOptions["STORAGE"]): Promise<StoreOptions> {
  const dir = await mkdtemp(join(tmpdir(), "gw-store-"));
  dirs.push(dir);
  const prefix = uniqueRedisPrefix();
  prefixes.push(prefix);
  return { STORAGE: driver, DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix };
}

afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

function keyRecord(overrides: Partial<KeyRecord> = {}): KeyRecord {
  return {
    id: "key_1",
    kind: "gateway",
    owner: "usr_a",
    userId: "usr_a",
    name: "k",
    hash: "a".repeat(64),
    hint: "sk_abcd…",
    scopes: ["*"],
    createdAt: new Date().toISOString(),
    expiresAt: null,
    lastUsedAt: null,
    revokedAt: null,
    spendLimit: null,
    rpmLimit: null,
    tpmLimit: null,
    ...overrides,
  };
}

// One conformance suite, every driver: memory, fs, and the real Redis server.
describe.each(["memory", "fs", "redis"] as const)("storage driver %s", (driver) => {
  let store: Store;
  let options: StoreOptions;

  beforeEach(async () => {
    options = await optionsFor(driver);
    store = await openStore(options);
  });
  afterEach(async () => {
    vi.useRealTimers();
    await store.close();
  });

  it("stores, lists by prefix and removes typed records", async () => {
    // Any collection listed by owner (storage/layout.ts) behaves the same.
    const things = new Collection<{ id: string; n: number }>(store, "keys");
    await things.put(["owner1", "b"], { id: "b", n: 2 });
    await things.put(["owner1", "a"], { id: "a", n: 1 });
    await things.put(["owner2", "c"], { id: "c", n: 3 });
    expect(await things.get("owner1", "a")).toEqual({ id: "a", n: 1 });
    expect((await things.list("owner1")).map((t) => t.id)).toEqual(["a", "b"]);
    await things.remove("owner1", "a");
    expect(await things.get("owner1", "a")).toBeNull();
    expect((await things.list("owner1")).map((t) => t.id)).toEqual(["b"]);
    expect(() => things.key("../etc")).toThrow();
  });

  const userRecord = (id: string) => ({
    id,
    email: "same@example.com",
    fullName: "",
    passwordHash: "x",
    tenantId: "ten_1",
    workspaceId: "ws_1",
    plan: "free",
    createdAt: "",
  });

  it("lets exactly one of many concurrent claims of an email win", async () => {
    const users = new UsersRepo(store);
    // Registration writes the user record first and claims the email last (the claim commits it).
    for (let i = 0; i < 12; i++) await users.put(userRecord(`usr_${i}`));
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => users.claimEmail("Same@Example.com", `usr_${i}`)));
    expect(results.filter(Boolean)).toHaveLength(1);
    await users.put(userRecord("usr_x"));
    expect(await users.claimEmail("same@example.com", "usr_x")).toBe(false);
  });

  it("hands over an email claimed by a registration that never wrote its user (killed mid-way)", async () => {
    const users = new UsersRepo(store);
    expect(await users.claimEmail("left@example.com", "usr_gone")).toBe(true);
    expect(await users.byEmail("left@example.com")).toBeNull();
    await users.put({ ...userRecord("usr_new"), email: "left@example.com" });
    const claims = await Promise.all([users.claimEmail("left@example.com", "usr_new"), users.claimEmail("left@example.com", "usr_new")]);
    expect(claims).toEqual([true, true]);
    expect((await users.byEmail("left@example.com"))?.id).toBe("usr_new");
  });

  it("finds keys by hash and forgets them once revoked", async () => {
    const keys = new KeysRepo(store);
    const record = await keys.create(keyRecord());
    expect((await keys.findByHash(record.hash))?.id).toBe("key_1");
    expect(await keys.list("usr_a")).toHaveLength(1);
    await keys.revoke(record, new Date().toISOString());
    expect(await keys.findByHash(record.hash)).toBeNull();
    expect(await keys.get("usr_a", "key_1")).toBeNull();
    expect(await keys.list("usr_a")).toHaveLength(0);
  });

  it("debits a balance atomically under concurrency, never below the floor", async () => {
    await store.atomic.adjust("bal", 100);
    const results = await Promise.all(Array.from({ length: 25 }, () => store.atomic.debit("bal", 10)));
    expect(results.filter((r) => r.ok)).toHaveLength(10);
    expect(await store.atomic.balance("bal")).toBe(0);
  });

  it("adds several deltas in one step without losing concurrent ones", async () => {
    await store.atomic.adjust("count:b", 5);
    await Promise.all(
      Array.from({ length: 30 }, () =>
        store.atomic.addAll([
          ["count:a", 1],
          ["count:b", -2],
          ["count:c", 7],
        ]),
      ),
    );
    expect(await store.atomic.balance("count:a")).toBe(30);
    expect(await store.atomic.balance("count:b")).toBe(5 - 60);
    expect(await store.atomic.balance("count:c")).toBe(210);
    await store.atomic.addAll([]);
  });

  it("charges and grants credits without losing concurrent updates", async () => {
    const credits = new CreditsRepo(store);
    await credits.grant("ws_1", 1_000);
    await Promise.all(Array.from({ length: 40 }, () => credits.charge("ws_1", 30)));
    expect(await credits.balance("ws_1")).toBe(1_000 - 1_200);
  });

  it("compare-and-set replaces only the expected value", async () => {
    expect(await store.atomic.compareAndSet("lease", null, "a")).toBe(true);
    expect(await store.atomic.compareAndSet("lease", null, "b")).toBe(false);
    expect(await store.atomic.compareAndSet("lease", "x", "b")).toBe(false);
    expect(await store.atomic.compareAndSet("lease", "a", "b")).toBe(true);
    expect(await store.atomic.get("lease")).toBe("b");
    expect(await store.atomic.compareAndSet("lease", "b", null)).toBe(true);
    expect(await store.atomic.get("lease")).toBeNull();
  });

  it("counts in windows that start at the first increment", async () => {
    const counts = await Promise.all(Array.from({ length: 20 }, () => store.atomic.increment("win", 1, 60_000)));
    expect(counts.map((c) => c.value).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(counts.every((c) => c.ttlMs > 0 && c.ttlMs <= 60_000)).toBe(true);
    expect(await store.atomic.counter("win")).toBe(20);
  });

  it("delivers bus messages to subscribers and stops after unsubscribe", async () => {
    const received: unknown[] = [];
    const unsubscribe = await store.bus.subscribe("chan", (message) => received.push(message));
    await store.bus.publish("chan", { n: 1 });
    await vi.waitFor(() => expect(received).toEqual([{ n: 1 }]));
    await unsubscribe();
    // A message on another channel published after it arrives after it: once that one is in,
    // the unsubscribed one would have been too.
    const sentinel: unknown[] = [];
    await store.bus.subscribe("chan-after", (message) => sentinel.push(message));
    await store.bus.publish("chan", { n: 2 });
    await store.bus.publish("chan-after", { n: 3 });
    await vi.waitFor(() => expect(sentinel).toEqual([{ n: 3 }]));
    expect(received).toEqual([{ n: 1 }]);
  });

  it("keeps what was acknowledged across a restart (fs and redis)", async () => {
    const users = new UsersRepo(store);
    await users.put({
      id: "usr_r",
      email: "r@example.com",
      fullName: "R",
      passwordHash: "x",
      tenantId: "t",
      workspaceId: "w",
      plan: "free",
      createdAt: "now",
    });
    await users.claimEmail("r@example.com", "usr_r");
    await new CreditsRepo(store).grant("ws_r", 42);
    await store.close();
    store = await openStore(options);
    const reopened = new UsersRepo(store);
    if (driver === "memory") {
      expect(await reopened.get("usr_r")).toBeNull();
      return;
    }
    expect((await reopened.byEmail("R@example.com"))?.id).toBe("usr_r");
    expect(await new CreditsRepo(store).balance("ws_r")).toBe(42);
  });
});

describe("redis store", () => {
  it("shares rate limiter counters between two stores on the same backend", async () => {
    const options = await optionsFor("redis");
    const store = await openStore(options);
    const other = await openStore(options);
    try {
      const a = store.limiter({ name: "shared", points: 3, durationSeconds: 60 });
      const b = other.limiter({ name: "shared", points: 3, durationSeconds: 60 });
      const outcomes = await Promise.allSettled([a.consume("k"), b.consume("k"), a.consume("k"), b.consume("k"), a.consume("k")]);
      expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(3);
    } finally {
      await other.close();
      await store.close();
    }
  });

  it("settles a hold placed by another instance as the one that placed it would, capped hold included", async () => {
    const options = await optionsFor("redis");
    const placer = await openStore(options);
    const settler = await openStore(options);
    try {
      await placer.atomic.adjust("bal:x", 100);
      // One whole hold and one capped at what remains.
      expect(await placer.atomic.hold("h1", [{ key: "bal:x", kind: "balance", amount: 60 }], 60_000)).toBeNull();
      expect(await placer.atomic.hold("h2", [{ key: "bal:x", kind: "balance", amount: 90 }], 60_000)).toBeNull();
      expect(await placer.atomic.account("bal:x")).toMatchObject({ value: 100, held: 100, capped: "h2" });
      // The settler never saw these holds: it reads what they placed from the account.
      await settler.atomic.settle("h2", [{ key: "bal:x", delta: -50 }]);
      expect(await placer.atomic.account("bal:x")).toEqual({ value: 50, held: 60, ttlMs: 0 });
      await settler.atomic.settle("h1", [{ key: "bal:x", delta: -10 }]);
      // Settled once: the placer's own settlement of the same hold releases nothing twice.
      await placer.atomic.settle("h1", [{ key: "bal:x", delta: 0 }]);
      expect(await settler.atomic.account("bal:x")).toEqual({ value: 40, held: 0, ttlMs: 0 });
    } finally {
      await settler.close();
      await placer.close();
    }
  });
});

describe("local atomic windows", () => {
  it("expire on the clock (fake timers)", async () => {
    vi.useFakeTimers();
    try {
      const store = await openStore({ STORAGE: "memory", DATA_DIR: ".", REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: "x" });
      await store.atomic.increment("w", 5, 1_000);
      vi.advanceTimersByTime(999);
      expect(await store.atomic.counter("w")).toBe(5);
      vi.advanceTimersByTime(1);
      expect(await store.atomic.counter("w")).toBe(0);
      expect((await store.atomic.increment("w", 1, 1_000)).value).toBe(1);
      expect(await store.atomic.setIfAbsent("t", "1", 500)).toBe(true);
      vi.advanceTimersByTime(500);
      expect(await store.atomic.get("t")).toBeNull();
      await store.close();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("fs store: one owner per DATA_DIR", () => {
  it("keeps records in the journal, not one file per record, and leaves no temporary files", async () => {
    const options = await optionsFor("fs");
    const store = await openStore(options);
    const things = new Collection<{ id: string; body: string }>(store, "things");
    await Promise.all(Array.from({ length: 30 }, (_, i) => things.put(["x"], { id: "x", body: "y".repeat(1000 + i) })));
    const files = await readdir(options.DATA_DIR, { recursive: true });
    expect(files.filter((file) => file.startsWith("things") || file.endsWith(".tmp"))).toEqual([]);
    expect(files).toContain(join(".store", "snapshot"));
    await store.close();
    const reopened = await openStore(options);
    expect((await new Collection<{ id: string; body: string }>(reopened, "things").get("x"))?.body.length).toBeGreaterThanOrEqual(1000);
    await reopened.close();
  });

  it("refuses a second owner with a one-line reason, serves the admin path over a 0600 socket, and frees the directory on close", async () => {
    const options = await optionsFor("fs");
    const owner = await openStore(options);
    await expect(openStore(options)).rejects.toMatchObject({
      code: "DATA_DIR_BUSY",
      message: expect.stringMatching(/^DATA_DIR .* is in use by another process \(pid \d+\)/),
    });
    expect((await stat(join(options.DATA_DIR, ".store.sock"))).mode & 0o777).toBe(0o600);
    const side = await openStore(options, { whenOwned: "connect" });
    const received: unknown[] = [];
    await owner.bus.subscribe("chan", (message) => received.push(message));
    await new CreditsRepo(side).grant("ws_s", 40);
    await Promise.all([new CreditsRepo(owner).charge("ws_s", 15), new CreditsRepo(side).charge("ws_s", 5)]);
    expect(await new CreditsRepo(owner).balance("ws_s")).toBe(20);
    await side.kv.setItem("things:a", { id: "a" });
    expect(await owner.kv.getItem("things:a")).toEqual({ id: "a" });
    expect(await side.kv.getKeys("things")).toEqual(["things:a"]);
    expect(await side.atomic.setIfAbsent("claim", "side")).toBe(true);
    expect(await owner.atomic.setIfAbsent("claim", "owner")).toBe(false);
    await side.bus.publish("chan", { n: 1 });
    await vi.waitFor(() => expect(received).toEqual([{ n: 1 }]));
    await side.close();
    await owner.close();
    // Free again: the next process owns it, with everything acknowledged before.
    const next = await openStore(options);
    expect(await new CreditsRepo(next).balance("ws_s")).toBe(20);
    expect(await next.atomic.get("claim")).toBe("side");
    await next.close();
  });

  it("takes over at once the directory of an owner that was killed", async () => {
    const options = await optionsFor("fs");
    const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/fs-owner.ts"], {
      env: { ...process.env, DATA_DIR: options.DATA_DIR },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on("data", (chunk) => String(chunk).includes("READY") && resolve());
      child.once("exit", () => reject(new Error("owner exited")));
    });
    await expect(openStore(options)).rejects.toMatchObject({ code: "DATA_DIR_BUSY", message: expect.stringContaining(`pid ${child.pid}`) });
    child.kill("SIGKILL");
    await exited;
    // Its lock directory, pid file and socket are still there; its lock is not stale yet.
    const store = await openStore(options);
    expect(await new CreditsRepo(store).balance("ws_k")).toBe(7);
    await store.close();
  });

  it("takes over at once from a killed owner its parent has not reaped yet (a zombie)", async () => {
    const options = await optionsFor("fs");
    // The owner's parent is a shell that execs `sleep`: nothing reaps the owner once it is
    // killed, so its pid stays in the process table (state Z) until the sleep ends.
    const script = `${JSON.stringify(process.execPath)} --import tsx test/fixtures/fs-owner.ts & echo "OWNER $!"; exec sleep 30`;
    const parent = spawn("sh", ["-c", script], {
      env: { ...process.env, DATA_DIR: options.DATA_DIR },
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      let output = "";
      const ownerPid = await new Promise<number>((resolve, reject) => {
        parent.stdout!.on("data", (chunk) => {
          output += String(chunk);
          const pid = /OWNER (\d+)/.exec(output)?.[1];
          if (pid && output.includes("READY")) resolve(Number(pid));
        });
        parent.once("exit", () => reject(new Error("owner's parent exited")));
      });
      await expect(openStore(options)).rejects.toMatchObject({ code: "DATA_DIR_BUSY" });
      process.kill(ownerPid, "SIGKILL");
      await eventually(() => /\) [ZX] /.test(readFileSync(`/proc/${ownerPid}/stat`, "utf8")));
      expect(() => process.kill(ownerPid, 0)).not.toThrow(); // still in the table
      const store = await openStore(options);
      expect(await new CreditsRepo(store).balance("ws_k")).toBe(7);
      await store.close();
    } finally {
      parent.kill("SIGKILL");
    }
  });
});
