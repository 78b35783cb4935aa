import { hostname } from "node:os";
import { Redis } from "ioredis";
import { maskUrlPasswords } from "./mask.js";

/**
 * Why REDIS_URL cannot be used, in words for its one-line start error; undefined when it can.
 * Checked with the rest of the configuration, before anything connects: the scheme, a host, the
 * port, and the database (the path) as a number — ioredis would send `SELECT NaN` for `/abc`
 * and crash, and a database the server does not have is checked once connected (`selectDb`).
 */
export function redisUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "not a URL; use redis://[:password@]host[:port][/db] or rediss://… for TLS";
  }
  if (url.protocol !== "redis:" && url.protocol !== "rediss:") return "must start with redis:// or rediss://";
  if (!url.hostname) return "names no host; use redis://host:6379";
  if (url.pathname !== "" && url.pathname !== "/" && !/^\/\d{1,9}$/.test(url.pathname)) {
    return `the database (the path, "${url.pathname}") must be a number such as /0`;
  }
  return undefined;
}

/** The database number REDIS_URL names (0 without one). */
export function redisDb(value: string): number {
  const path = new URL(value).pathname.slice(1);
  return path ? Number(path) : 0;
}

/** An error of the start that names what to change (scripts/startup-errors.ts prints its message with REDIS_URL). */
export class RedisSetupError extends Error {
  readonly code = "REDIS_SETUP";
}

/**
 * One connection, named for `CLIENT LIST` (`<prefix>:<role>:<host>:<pid>`), so an operator can
 * tell the service's connections and their roles apart. Without ioredis auto-pipelining: a chat
 * request sends two or three commands, and auto-pipelining built a Pipeline object per event-loop
 * turn for them, which cost more than the writes it saved (docs/performance.md: 252–258 against
 * 283–305 µs of CPU per Platform request at c=16). `commandTimeoutMs` (STORAGE_TIMEOUT_MS) bounds
 * every command's wait for its reply.
 */
export function connectRedis(url: string, prefix: string, role: string, commandTimeoutMs?: number): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: 2,
    // A Redis that stops answering (paused, swapping, a network that drops packets) fails each
    // command after this with "Command timed out": 503 (storage/outage.ts), never a request held.
    ...(commandTimeoutMs ? { commandTimeout: commandTimeoutMs } : {}),
    enableOfflineQueue: true,
    lazyConnect: false,
    connectionName: `${prefix}:${role}:${hostname().replace(/[^\w.-]/g, "_")}:${process.pid}`,
  });
  // Without a listener ioredis reports connection errors as unhandled; commands still fail fast.
  redis.on("error", () => undefined);
  return redis;
}

/** Moves a fresh connection to REDIS_URL's database, or says that the server has no such database. */
export async function selectDb(redis: Redis, url: string): Promise<void> {
  const db = redisDb(url);
  if (db === 0) return;
  try {
    await redis.select(db);
  } catch (error) {
    const databases = await redis
      .config("GET", "databases")
      .then((reply) => (reply as string[])[1])
      .catch(() => undefined);
    throw new RedisSetupError(
      `this Redis has no database ${db} (${databases ? `it has ${databases}, 0 to ${Number(databases) - 1}` : (error as Error).message}); name one it has, e.g. /0`,
    );
  }
}

/** What the start found out about the server (INFO), for the checks below. */
export interface RedisServerFacts {
  version: string;
  maxmemoryPolicy: string;
  appendonly: boolean;
  /** RDB save points (`CONFIG GET save`), "" for none; undefined when CONFIG is refused (managed Redis). */
  savePoints: string | undefined;
}

export async function serverFacts(redis: Redis): Promise<RedisServerFacts> {
  const info = await redis.info();
  const field = (name: string) => new RegExp(`^${name}:(.*)$`, "m").exec(info)?.[1]?.trim() ?? "";
  const savePoints = await redis
    .config("GET", "save")
    .then((reply) => String((reply as string[])[1] ?? ""))
    .catch(() => undefined);
  return {
    version: field("redis_version"),
    maxmemoryPolicy: field("maxmemory_policy") || "noeviction",
    appendonly: field("aof_enabled") === "1",
    savePoints,
  };
}

/**
 * The settings the service needs of Redis (docs/storage.md "Redis in production"): it holds
 * the only copy of accounts, keys and balances, so Redis must never evict them. A
 * `maxmemory-policy` other than `noeviction` stops the start (RedisSetupError) unless
 * `allowEviction` (REDIS_ALLOW_EVICTION=true); data kept only in memory (no AOF, no RDB save
 * points) is a warning. Returns the warnings.
 */
export function checkServer(facts: RedisServerFacts, url: string, allowEviction: boolean): string[] {
  const notices: string[] = [];
  if (facts.maxmemoryPolicy !== "noeviction") {
    const text =
      `Redis evicts keys when its memory is full (maxmemory-policy ${facts.maxmemoryPolicy}), which would silently lose users, ` +
      "keys, balances and event acknowledgements";
    if (!allowEviction)
      throw new RedisSetupError(
        `${text}: set maxmemory-policy noeviction (docs/storage.md "Redis in production"), or REDIS_ALLOW_EVICTION=true to run anyway`,
      );
    notices.push(`${text}; running anyway because REDIS_ALLOW_EVICTION=true`);
  }
  if (!facts.appendonly && facts.savePoints === "") {
    notices.push(
      `Redis at ${maskUrlPasswords(url)} keeps nothing on disk (appendonly no, no save points): a restart of Redis loses every user, key and ` +
        'balance; turn on appendonly yes (docs/storage.md "Redis in production")',
    );
  }
  return notices;
}
