import { link, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from "rate-limiter-flexible";
import { createStorage, type Storage } from "unstorage";
import { rawRedisDriver } from "./redis-raw-driver.js";
import { LocalAtomic, type Atomic } from "./atomic.js";
import { MemoryBus, RedisBus, type Bus } from "./bus.js";
import { atomicFsDriver, journalDriver, readLegacyLayout, removeOrphanTempFiles, setLegacyLayoutAside } from "./fs-driver.js";
import { Journal } from "./journal.js";
import { claimDataDir, DataDirBusyError, type DataDirOwner } from "./owner.js";
import { connectToOwner, ownerAtomic, ownerDriver, ownerIndexes, serveStore } from "./remote.js";
import { RedisAtomic } from "./redis-atomic.js";
import { type Indexes, LocalIndexes, RedisIndexes } from "./indexes.js";
import { MemoryRecords } from "./record-map.js";
import { reindexLocal, reindexRedis } from "./reindex.js";
import {
  checkServer,
  connectionFailure,
  connectRedis,
  firstAnswer,
  type RedisSettings,
  RedisSetupError,
  redisTarget,
  selectDb,
  serverFacts,
} from "./redis-setup.js";

/** The notice that the indexes of existing records were built (storage/reindex.ts), when they were. */
function reindexNotice(count: number): string[] {
  return count > 0 ? [`indexed ${count} existing records, once, for this version's listings (docs/storage.md "Indexes")`] : [];
}

export interface LimiterOptions {
  /** Namespace of the counters. */
  name: string;
  points: number;
  durationSeconds: number;
}

/** Persistence as the rest of the service sees it, whatever the driver. */
export interface Store {
  readonly driver: StoreOptions["STORAGE"];
  readonly kv: Storage;
  /** Records written with their index entries, and the indexes every listing reads (storage/indexes.ts). */
  readonly indexes: Indexes;
  readonly atomic: Atomic;
  readonly bus: Bus;
  /** A rate limiter whose counters are shared by every instance on the same Redis. */
  limiter(options: LimiterOptions): RateLimiterAbstract;
  /** REDIS_PREFIX (redis driver only), for repositories that keep keys of their own. */
  readonly prefix?: string;
  /** A new Redis connection (redis driver only), named after its `role`, for callers that need their own. */
  duplicateRedis?(role?: string): Redis;
  /** Reads a secret persisted beside the data (fs), creating it on first use. */
  persistentSecret(name: string): Promise<string | undefined>;
  /**
   * Whether storage takes writes now (/readyz, bridge health): Redis answers a write (not when
   * it is unreachable or refuses writes past maxmemory); the fs journal has not failed. Rejects
   * or answers `{ok: false, error}` otherwise.
   */
  probe(): Promise<{ ok: boolean; error?: string }>;
  /** What the start found worth saying once (Redis kept only in memory, indexes built): logged by the composition. */
  readonly notices: readonly string[];
  close(): Promise<void>;
}

/**
 * Where the data lives (docs/interface.md 8: STORAGE, DATA_DIR, REDIS_URL, REDIS_PREFIX; TLS and
 * Sentinel settings: storage/redis-setup.ts).
 */
export interface StoreOptions extends RedisSettings {
  STORAGE: "memory" | "fs" | "redis";
  DATA_DIR: string;
  REDIS_PREFIX: string;
  /** Run on a Redis whose maxmemory-policy may evict keys (docs/storage.md "Redis in production"). */
  REDIS_ALLOW_EVICTION?: boolean;
  /** Deadline of one Redis command (docs/storage.md "When Redis stops answering"); none when absent. */
  STORAGE_TIMEOUT_MS?: number;
}

/**
 * Resolves once `redis` has finished its handshake (status `ready`). The bus's subscriber waits
 * for it before its first SUBSCRIBE: ioredis 5.8+ may otherwise send the SUBSCRIBE before its
 * own ready check, which then fails with "Connection in subscriber mode" (redis/ioredis#2037).
 */
function whenReady(redis: Redis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === "ready") return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off("ready", onReady);
      reject(new Error(`not ready within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once("ready", onReady);
  });
}

/**
 * With STORAGE=fs when another process owns DATA_DIR: "fail" (a server: DataDirBusyError) or
 * "connect" (the admin command: every operation goes to the owner over its socket).
 */
export interface OpenStoreOptions {
  whenOwned?: "fail" | "connect";
}

/** Record directories that stay one file per record on fs (large blobs, off the journal). */
const FILE_MOUNTS = ["artifact-blobs"];

export async function openStore(options: StoreOptions, open: OpenStoreOptions = {}): Promise<Store> {
  if (options.STORAGE === "redis") return openRedisStore(options);
  if (options.STORAGE === "fs") return openFsStore(options, open);
  const records = new MemoryRecords();
  const kv = createStorage({ driver: journalDriver(records) });
  return localStore(options, kv, new LocalIndexes(records), new LocalAtomic(), new MemoryBus(), async () => undefined);
}

interface LocalParts {
  /** What the start found worth saying (an fs store's indexes built). */
  notices?: string[];
  /** Why writes are refused now, if they are (the fs journal after a failed write). */
  refusal?: () => Error | undefined;
}

function localStore(
  options: StoreOptions,
  kv: Storage,
  indexes: Indexes,
  atomic: Atomic,
  bus: Bus,
  release: () => Promise<void>,
  parts: LocalParts = {},
): Store {
  return {
    driver: options.STORAGE,
    kv,
    indexes,
    atomic,
    notices: parts.notices ?? [],
    async probe() {
      const refused = parts.refusal?.();
      if (refused) return { ok: false, error: refused.message };
      await kv.getItem("health:probe");
      return { ok: true };
    },
    bus,
    limiter: ({ name, points, durationSeconds }) => new RateLimiterMemory({ keyPrefix: name, points, duration: durationSeconds }),
    async persistentSecret(name) {
      if (options.STORAGE !== "fs") return undefined;
      const dir = resolve(options.DATA_DIR);
      const path = join(dir, `.${name}`);
      const read = async () => (await readFile(path, "utf8")).trim();
      try {
        return await read();
      } catch {
        await mkdir(dir, { recursive: true });
        // Written whole, then linked into place (fails if another process got there first):
        // a kill mid-write never leaves a truncated secret.
        const tmp = `${path}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`;
        await writeFile(tmp, randomBytes(32).toString("base64url"), { mode: 0o600 });
        await link(tmp, path).catch(() => undefined);
        await rm(tmp, { force: true });
        return read();
      }
    },
    async close() {
      await bus.close();
      await kv.dispose();
      await release();
    },
  };
}

/**
 * fs (docs/storage.md): this process takes DATA_DIR for itself, loads every record into
 * memory (storage/journal.ts; an older one-file-per-record layout is imported on the first
 * open) and serves other processes — the admin command — on `DATA_DIR/.store.sock`.
 */
async function openFsStore(options: StoreOptions, open: OpenStoreOptions): Promise<Store> {
  const base = resolve(options.DATA_DIR);
  await mkdir(base, { recursive: true });
  const socketPath = join(base, ".store.sock");
  let owner: DataDirOwner;
  try {
    owner = await claimDataDir(base);
  } catch (error) {
    if (!(error instanceof DataDirBusyError) || open.whenOwned !== "connect") throw error;
    const connection = await connectToOwner(socketPath).catch(() => {
      throw error;
    });
    const kv = createStorage({ driver: ownerDriver(connection) });
    const bus = new MemoryBus();
    // Messages for the owner's subscribers (a model registry change) are published there.
    const remoteBus: Bus = {
      publish: async (channel, message) => void (await connection.call("bus", "publish", [channel, message])),
      subscribe: (channel, handler) => bus.subscribe(channel, handler),
      close: () => bus.close(),
    };
    return localStore(options, kv, ownerIndexes(connection), ownerAtomic(connection), remoteBus, async () => undefined);
  }
  let stopServing: () => Promise<void> = async () => undefined;
  let kv: Storage | undefined;
  try {
    // Crash consistency (docs/crash-consistency.md): a blob write cut by kill -9 left a
    // temporary file and never touched its record; those of dead processes go first.
    await removeOrphanTempFiles(base);
    let legacy: Awaited<ReturnType<typeof readLegacyLayout>>;
    const journal = await Journal.open(join(base, ".store"), {
      seed: async () => (legacy = await readLegacyLayout(base, FILE_MOUNTS))?.records,
      onError: (error) => process.stderr.write(`storage: ${error.message}\n`),
    });
    if (legacy) await setLegacyLayoutAside(base, legacy.entries);
    const notices = reindexNotice(await reindexLocal(journal));
    await rm(join(base, ".locks"), { recursive: true, force: true });
    kv = createStorage({ driver: journalDriver(journal) });
    for (const mount of FILE_MOUNTS) kv.mount(mount, atomicFsDriver({ base: join(base, mount) }));
    // The ledger reads and writes the journal's records directly (synchronous reads, no
    // unstorage layer on the hot path); the keys are those unstorage gave them.
    const atomic = new LocalAtomic({
      get: (key) => journal.get(key),
      set: (key, value) => journal.set(key, value),
      remove: (key) => journal.remove(key),
      write: (changes) => journal.write(changes),
    });
    const bus = new MemoryBus();
    const store = localStore(
      options,
      kv,
      new LocalIndexes(journal),
      atomic,
      bus,
      async () => {
        await stopServing();
        await owner.release();
      },
      { notices, refusal: () => journal.failure },
    );
    try {
      stopServing = await serveStore(socketPath, store);
    } catch (error) {
      // A DATA_DIR path too long for a unix socket: the server runs; the admin command waits for it to stop.
      process.stderr.write(
        `storage: cannot listen on ${socketPath} (${(error as Error).message}); npm run admin will not run while this process runs\n`,
      );
    }
    const close = store.close;
    // The socket stops before the journal closes: no operation arrives after the last flush.
    return {
      ...store,
      async close() {
        await stopServing();
        stopServing = async () => undefined;
        await close();
      },
    };
  } catch (error) {
    await kv?.dispose().catch(() => undefined);
    await owner.release();
    throw error;
  }
}

/**
 * Redis (docs/storage.md "Redis in production"): two named connections (commands, and the
 * bus's subscriber), REDIS_URL's database checked, the server's settings checked (an evicting
 * maxmemory-policy stops the start), the indexes of existing records built once.
 */
async function openRedisStore(options: StoreOptions): Promise<Store> {
  const prefix = options.REDIS_PREFIX;
  const timeoutMs = options.STORAGE_TIMEOUT_MS;
  const target = redisTarget(options);
  const client = connectRedis(target, prefix, "main", timeoutMs);
  // The subscriber only holds its subscriptions: no command of a request waits on it.
  const subscriber = connectRedis(target, prefix, "subscriber");
  const fail = (error: unknown): never => {
    client.disconnect();
    subscriber.disconnect();
    throw error;
  };
  try {
    await firstAnswer(client, target);
    await whenReady(subscriber);
  } catch (error) {
    // Its code lets the start script name the setting to change in its one-line message.
    fail(connectionFailure(target, [client, subscriber], error));
  }
  const notices: string[] = [];
  try {
    await selectDb(client, options.REDIS_URL);
    notices.push(...checkServer(await serverFacts(client), target.where, options.REDIS_ALLOW_EVICTION === true));
  } catch (error) {
    fail(
      error instanceof RedisSetupError
        ? error
        : new RedisSetupError(`Redis did not answer the start's checks: ${(error as Error).message}`),
    );
  }
  const kv = createStorage({ driver: rawRedisDriver({ base: `${prefix}:kv`, client }) });
  const indexes = new RedisIndexes(client, prefix);
  try {
    notices.push(...reindexNotice(await reindexRedis(client, prefix, indexes)));
  } catch (error) {
    fail(error);
  }
  const atomic = new RedisAtomic(client, prefix);
  const bus = new RedisBus(client, subscriber, prefix);
  const extra: Redis[] = [];
  const probeKey = `${prefix}:probe:${process.pid}`;
  return {
    driver: "redis",
    prefix,
    kv,
    indexes,
    atomic,
    bus,
    notices,
    limiter: ({ name, points, durationSeconds }) =>
      new RateLimiterRedis({ storeClient: client, keyPrefix: `${prefix}:rl:${name}`, points, duration: durationSeconds }),
    duplicateRedis(role = "extra") {
      const redis = connectRedis(target, prefix, role, timeoutMs);
      extra.push(redis);
      return redis;
    },
    async persistentSecret() {
      return undefined;
    },
    async probe() {
      // A write: Redis past maxmemory (noeviction) still answers reads but refuses this.
      await client.set(probeKey, Date.now(), "PX", 10_000);
      return { ok: true };
    },
    async close() {
      await bus.close();
      await kv.dispose();
      for (const redis of [client, subscriber, ...extra]) redis.disconnect();
    },
  };
}
