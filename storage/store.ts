import { link, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from "rate-limiter-flexible";
import { createStorage, type Storage } from "unstorage";
import memoryDriver from "unstorage/drivers/memory";
import { rawRedisDriver } from "./redis-raw-driver.js";
import { LocalAtomic, type Atomic } from "./atomic.js";
import { MemoryBus, RedisBus, type Bus } from "./bus.js";
import { atomicFsDriver, removeOrphanTempFiles } from "./fs-driver.js";
import { fsInterProcessLock } from "./fs-lock.js";
import { RedisAtomic } from "./redis-atomic.js";

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
  readonly atomic: Atomic;
  readonly bus: Bus;
  /** A rate limiter whose counters are shared by every instance on the same Redis. */
  limiter(options: LimiterOptions): RateLimiterAbstract;
  /** REDIS_PREFIX (redis driver only), for repositories that keep keys of their own. */
  readonly prefix?: string;
  /** A new Redis connection (redis driver only), for callers that need their own subscriber. */
  duplicateRedis?(): Redis;
  /** Reads a secret persisted beside the data (fs), creating it on first use. */
  persistentSecret(name: string): Promise<string | undefined>;
  close(): Promise<void>;
}

/** Where the data lives (spec 8: STORAGE, DATA_DIR, REDIS_URL, REDIS_PREFIX). */
export interface StoreOptions {
  STORAGE: "memory" | "fs" | "redis";
  DATA_DIR: string;
  REDIS_URL: string;
  REDIS_PREFIX: string;
}

function connectRedis(url: string, options: { autoPipelining?: boolean } = {}): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false, enableAutoPipelining: options.autoPipelining === true });
  // Without a listener ioredis reports connection errors as unhandled; commands still fail fast.
  redis.on("error", () => undefined);
  return redis;
}

export async function openStore(options: StoreOptions): Promise<Store> {
  if (options.STORAGE === "redis") return openRedisStore(options);
  const fs = options.STORAGE === "fs";
  // Crash consistency (docs/crash-consistency.md): a write cut by kill -9 left a temporary
  // file and never touched its record; those of dead processes go before anything reads.
  if (fs) await removeOrphanTempFiles(resolve(options.DATA_DIR));
  const kv = fs ? createStorage({ driver: atomicFsDriver({ base: resolve(options.DATA_DIR) }) }) : createStorage({ driver: memoryDriver() });
  // fs: the admin command and the server may share DATA_DIR, so every read-modify-write also
  // takes an inter-process lock (proper-lockfile).
  const atomic = new LocalAtomic(kv, fs ? await fsInterProcessLock(resolve(options.DATA_DIR)) : undefined);
  const bus = new MemoryBus();
  return {
    driver: options.STORAGE,
    kv,
    atomic,
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
    },
  };
}

async function openRedisStore(options: StoreOptions): Promise<Store> {
  const prefix = options.REDIS_PREFIX;
  // Commands issued in the same tick leave in one write (docs/performance.md): the command
  // connection only; the subscriber and blocking readers keep their own plain connections.
  const client = connectRedis(options.REDIS_URL, { autoPipelining: true });
  const subscriber = connectRedis(options.REDIS_URL);
  try {
    await client.ping();
  } catch (error) {
    client.disconnect();
    subscriber.disconnect();
    // The code lets the start script name REDIS_URL in its one-line message.
    throw Object.assign(new Error(`Redis at ${options.REDIS_URL} did not answer: ${(error as Error).message}`), { code: "REDIS_UNREACHABLE" });
  }
  const kv = createStorage({ driver: rawRedisDriver({ url: options.REDIS_URL, base: `${prefix}:kv`, maxRetriesPerRequest: 2, client }) });
  const atomic = new RedisAtomic(client, prefix);
  const bus = new RedisBus(client, subscriber, prefix);
  const extra: Redis[] = [];
  return {
    driver: "redis",
    prefix,
    kv,
    atomic,
    bus,
    limiter: ({ name, points, durationSeconds }) =>
      new RateLimiterRedis({ storeClient: client, keyPrefix: `${prefix}:rl:${name}`, points, duration: durationSeconds }),
    duplicateRedis() {
      const redis = connectRedis(options.REDIS_URL);
      extra.push(redis);
      return redis;
    },
    async persistentSecret() {
      return undefined;
    },
    async close() {
      await bus.close();
      await kv.dispose();
      for (const redis of [client, subscriber, ...extra]) redis.disconnect();
    },
  };
}
