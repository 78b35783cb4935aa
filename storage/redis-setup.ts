import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import type { ConnectionOptions } from "node:tls";
import { Redis, type RedisOptions } from "ioredis";
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

/**
 * An error of the start that names what to change: scripts/startup-errors.ts prints its message
 * after `variable` (REDIS_URL unless another setting is the one to change) and its value.
 */
export class RedisSetupError extends Error {
  readonly code = "REDIS_SETUP";
  constructor(
    message: string,
    readonly variable = "REDIS_URL",
  ) {
    super(message);
  }
}

/**
 * The settings that say how to reach Redis (docs/storage.md "TLS, Sentinel and Cluster"): one
 * server at REDIS_URL, or the master a set of sentinels names, with TLS's CA and client
 * certificate from a variable (PEM text) or a file. Every connection option lives here.
 */
export interface RedisSettings {
  REDIS_URL: string;
  REDIS_TLS_CA?: string;
  REDIS_TLS_CA_FILE?: string;
  REDIS_TLS_CERT?: string;
  REDIS_TLS_CERT_FILE?: string;
  REDIS_TLS_KEY?: string;
  REDIS_TLS_KEY_FILE?: string;
  /** `host:port,host:port`: the sentinels to ask for the master named REDIS_SENTINEL_NAME. */
  REDIS_SENTINELS?: string;
  REDIS_SENTINEL_NAME?: string;
  REDIS_SENTINEL_PASSWORD?: string;
}

/** Where the connections go, read and checked once at start (`redisTarget`). */
export interface RedisTarget {
  url: string;
  /** How messages name it: REDIS_URL without its password, or the sentinels and the master's name. */
  where: string;
  /** TLS options (rediss://): the CA, the client certificate and key when given. */
  tls?: ConnectionOptions;
  sentinels?: { host: string; port: number }[];
  sentinelName?: string;
  sentinelPassword?: string;
}

/** `host:port` pairs, comma-separated (`[v6]:port` too); a RedisSetupError naming `what` when one is not. */
function parseHostPorts(value: string, what: string): { host: string; port: number }[] {
  const entries = value
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.length === 0)
    throw new RedisSetupError("names no host:port; list them comma-separated, e.g. 10.0.0.1:26379,10.0.0.2:26379", what);
  return entries.map((entry) => {
    const match = /^(\[[^\]]+\]|[^:\s]+):(\d{1,5})$/.exec(entry);
    const port = Number(match?.[2]);
    if (!match || port < 1 || port > 65535) {
      throw new RedisSetupError(`"${entry}" is not host:port; list them comma-separated, e.g. 10.0.0.1:26379,10.0.0.2:26379`, what);
    }
    return { host: match[1]!.replace(/^\[|\]$/g, ""), port };
  });
}

/** A PEM value from NAME (the text; `\n` escapes allowed, for one-line variables) or NAME_FILE (a path). */
function pemSetting(settings: RedisSettings, name: "REDIS_TLS_CA" | "REDIS_TLS_CERT" | "REDIS_TLS_KEY"): string | undefined {
  const text = settings[name];
  const file = settings[`${name}_FILE`];
  if (text && file) throw new RedisSetupError(`set either ${name} or ${name}_FILE, not both`, name);
  if (text) return text.replace(/\\n/g, "\n");
  if (!file) return undefined;
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new RedisSetupError(`${file} cannot be read (${code ?? (error as Error).message})`, `${name}_FILE`);
  }
}

/** The name a PEM setting is given by, for its errors. */
const givenAs = (settings: RedisSettings, name: "REDIS_TLS_CA" | "REDIS_TLS_CERT" | "REDIS_TLS_KEY") =>
  settings[`${name}_FILE`] ? `${name}_FILE` : name;

/** The TLS options, each PEM checked (a certificate that does not parse is named now, not as a handshake failure). */
function tlsOptions(settings: RedisSettings): ConnectionOptions | undefined {
  const ca = pemSetting(settings, "REDIS_TLS_CA");
  const cert = pemSetting(settings, "REDIS_TLS_CERT");
  const key = pemSetting(settings, "REDIS_TLS_KEY");
  const tls = new URL(settings.REDIS_URL).protocol === "rediss:";
  if (!tls) {
    const given = (["REDIS_TLS_CA", "REDIS_TLS_CERT", "REDIS_TLS_KEY"] as const).find((name) => pemSetting(settings, name));
    if (given) throw new RedisSetupError(`${givenAs(settings, given)} is set but REDIS_URL is not TLS: start it with rediss://`);
    return undefined;
  }
  if (Boolean(cert) !== Boolean(key)) {
    const missing = cert ? "REDIS_TLS_KEY" : "REDIS_TLS_CERT";
    throw new RedisSetupError(
      `a client certificate needs both REDIS_TLS_CERT(_FILE) and REDIS_TLS_KEY(_FILE); ${missing}(_FILE) is not set`,
      missing,
    );
  }
  const options: ConnectionOptions = {};
  if (ca) {
    const certificates = ca.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
    try {
      if (certificates.length === 0) throw new Error("no BEGIN CERTIFICATE block");
      for (const one of certificates) new X509Certificate(one);
    } catch (error) {
      throw new RedisSetupError(`does not hold a PEM CA certificate (${(error as Error).message})`, givenAs(settings, "REDIS_TLS_CA"));
    }
    options.ca = ca;
  }
  if (cert && key) {
    let certificate: X509Certificate;
    try {
      certificate = new X509Certificate(cert);
    } catch (error) {
      throw new RedisSetupError(`does not hold a PEM certificate (${(error as Error).message})`, givenAs(settings, "REDIS_TLS_CERT"));
    }
    try {
      // The message names the setting, never the key's text.
      if (!certificate.checkPrivateKey(createPrivateKey(key))) {
        throw new RedisSetupError(
          `is not the key of the client certificate in ${givenAs(settings, "REDIS_TLS_CERT")}`,
          givenAs(settings, "REDIS_TLS_KEY"),
        );
      }
    } catch (error) {
      if (error instanceof RedisSetupError) throw error;
      throw new RedisSetupError("does not hold a PEM private key (unencrypted PKCS#8, PKCS#1 or SEC1)", givenAs(settings, "REDIS_TLS_KEY"));
    }
    options.cert = cert;
    options.key = key;
  }
  return options;
}

/** Reads and checks the connection settings (files read once here); RedisSetupError names the one to change. */
export function redisTarget(settings: RedisSettings): RedisTarget {
  const tls = tlsOptions(settings);
  const url = settings.REDIS_URL;
  if (settings.REDIS_SENTINELS || settings.REDIS_SENTINEL_NAME) {
    if (!settings.REDIS_SENTINEL_NAME) {
      throw new RedisSetupError(
        "is needed with REDIS_SENTINELS: the master's name in the sentinels' configuration (e.g. mymaster)",
        "REDIS_SENTINEL_NAME",
      );
    }
    if (!settings.REDIS_SENTINELS) {
      throw new RedisSetupError("is needed with REDIS_SENTINEL_NAME: the sentinels as host:port, comma-separated", "REDIS_SENTINELS");
    }
    const sentinels = parseHostPorts(settings.REDIS_SENTINELS, "REDIS_SENTINELS");
    return {
      url,
      where: `the master "${settings.REDIS_SENTINEL_NAME}" of the sentinels ${sentinels.map(({ host, port }) => `${host}:${port}`).join(",")}`,
      tls,
      sentinels,
      sentinelName: settings.REDIS_SENTINEL_NAME,
      sentinelPassword: settings.REDIS_SENTINEL_PASSWORD,
    };
  }
  return { url, where: `Redis at ${maskUrlPasswords(url)}`, tls };
}

const ignore = () => undefined;

/** The last connection error of each connection, for start errors that say what failed (`connectionFailure`). */
const lastErrors = new WeakMap<Redis, Error>();

/** Node's codes for a server certificate the client does not trust. */
const UNTRUSTED = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_GET_ISSUER_CERT",
  "CERT_SIGNATURE_FAILURE",
]);

/**
 * The start's error for a Redis it could not use, saying what failed: a TLS failure (the
 * server's certificate not trusted, expired or for another name; the client certificate missing
 * or refused; TLS spoken to a plain port) is a RedisSetupError naming the setting to change;
 * anything else "did not answer" (code REDIS_UNREACHABLE).
 */
export function connectionFailure(target: RedisTarget, connections: Redis[], error: unknown): Error {
  if (error instanceof RedisSetupError || (error as { code?: string }).code === "REDIS_UNREACHABLE") return error as Error;
  const cause = connections.map((redis) => lastErrors.get(redis)).find(Boolean) ?? (error as Error);
  const code = (cause as NodeJS.ErrnoException).code ?? "";
  // OpenSSL's messages run over lines with its source paths: its reason says it in a few words.
  const text = ((cause as { reason?: string }).reason ?? cause.message).replace(/\s+/g, " ").trim();
  const detail = `${text}${code && !text.includes(code) ? ` (${code})` : ""}`;
  if (/^(WRONGPASS|NOAUTH)/.test(text)) {
    return new RedisSetupError(
      `${target.where}: refused the user and password in REDIS_URL (${detail}); use Redis's requirepass or an ACL user's`,
    );
  }
  if (target.tls) {
    const ca = target.tls.ca
      ? "REDIS_TLS_CA(_FILE) does not hold the CA that signed it"
      : "set REDIS_TLS_CA(_FILE) to the CA that signed it";
    if (UNTRUSTED.has(code))
      return new RedisSetupError(`${target.where}: its TLS certificate is not trusted (${detail}); ${ca}`, "REDIS_TLS_CA");
    if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") {
      return new RedisSetupError(
        `${target.where}: its TLS certificate is out of its validity dates (${detail}); renew the server's certificate`,
      );
    }
    if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
      return new RedisSetupError(
        `${target.where}: its TLS certificate is for another host name (${detail}); connect by a name the certificate lists`,
      );
    }
    if (/CERTIFICATE_REQUIRED/.test(code) || (!target.tls.cert && code === "ECONNRESET")) {
      return new RedisSetupError(
        `${target.where}: the server wants a TLS client certificate (tls-auth-clients yes, Redis's default) and closed the connection (${detail}); set REDIS_TLS_CERT(_FILE) and REDIS_TLS_KEY(_FILE)`,
        "REDIS_TLS_CERT",
      );
    }
    if (/ALERT_(UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|DECRYPT_ERROR)/.test(code) || (target.tls.cert && code === "ECONNRESET")) {
      return new RedisSetupError(
        `${target.where}: the server refused the TLS client certificate (${detail}); use one signed by the CA in the server's tls-ca-cert-file`,
        "REDIS_TLS_CERT",
      );
    }
    if (/WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG|UNEXPECTED_EOF/.test(code) || /WRONG_VERSION_NUMBER/.test(cause.message)) {
      return new RedisSetupError(
        `${target.where}: no TLS handshake there (${detail}); is this the server's TLS port (tls-port)? For a plain port use redis://`,
      );
    }
    if (code === "ETIMEDOUT") {
      // A plain Redis port waits for a line and never answers a TLS hello.
      const hint = "is this the server's TLS port (tls-port)? For a plain port use redis://";
      return Object.assign(new Error(`${target.where} did not answer: the TLS handshake did not finish (${detail}); ${hint}`), {
        code: "REDIS_UNREACHABLE",
      });
    }
  } else if (code === "ECONNRESET" || /Connection is closed/.test(cause.message)) {
    const hint = "if it is a TLS port (tls-port), use rediss://";
    return Object.assign(new Error(`${target.where} did not answer: it closed the connection (${detail}); ${hint}`), {
      code: "REDIS_UNREACHABLE",
    });
  }
  return Object.assign(new Error(`${target.where} did not answer: ${detail}`), { code: "REDIS_UNREACHABLE" });
}

/**
 * One connection, named for `CLIENT LIST` (`<prefix>:<role>:<host>:<pid>`), so an operator can
 * tell the service's connections and their roles apart. Without ioredis auto-pipelining: a chat
 * request sends two or three commands, and auto-pipelining built a Pipeline object per event-loop
 * turn for them, which cost more than the writes it saved (docs/performance.md: 252–258 against
 * 283–305 µs of CPU per Platform request at c=16). `commandTimeoutMs` (STORAGE_TIMEOUT_MS) bounds
 * every command's wait for its reply.
 */
export function connectRedis(target: RedisTarget, prefix: string, role: string, commandTimeoutMs?: number): Redis {
  const options: RedisOptions = {
    maxRetriesPerRequest: 2,
    // A Redis that stops answering (paused, swapping, a network that drops packets) fails each
    // command after this with "Command timed out": 503 (storage/outage.ts), never a request held.
    ...(commandTimeoutMs ? { commandTimeout: commandTimeoutMs } : {}),
    enableOfflineQueue: true,
    lazyConnect: false,
    connectionName: `${prefix}:${role}:${hostname().replace(/[^\w.-]/g, "_")}:${process.pid}`,
    ...(target.tls ? { tls: target.tls } : {}),
  };
  let redis: Redis;
  if (target.sentinels) {
    const url = new URL(target.url);
    redis = new Redis({
      ...options,
      sentinels: target.sentinels,
      name: target.sentinelName,
      username: url.username ? decodeURIComponent(url.username) : undefined,
      password: url.password ? decodeURIComponent(url.password) : undefined,
      sentinelPassword: target.sentinelPassword,
      db: redisDb(target.url),
      ...(target.tls ? { enableTLSForSentinelMode: true, sentinelTLS: target.tls } : {}),
      // Not ioredis's failoverDetector: its +switch-master disconnects a connection that is already
      // asking the sentinels anew after the master died, and that connection then ends for good
      // (status "end", every command refused). A connection to a dead master closes and reconnects
      // through the sentinels by itself.
      // A master demoted while this connection stayed open refuses writes: reconnect, asking the sentinels anew.
      reconnectOnError: (error) => (error.message.startsWith("READONLY") ? 2 : false),
    });
  } else {
    redis = new Redis(target.url, options);
  }
  // Without a listener ioredis reports connection errors as unhandled; commands still fail fast.
  // The last one is kept for the start's error (`connectionFailure`).
  redis.on("error", (error: Error) => {
    lastErrors.set(redis, error);
    // ioredis listens once for its socket's errors, and a TLS socket may report two (our refusal
    // of the server's certificate, then the server's alert): the second would crash the process.
    redis.stream?.on("error", ignore);
  });
  // What each sentinel said when it gave no master (unreachable, or no master of that name).
  redis.on("sentinelError", (error: Error) => sentinelErrors.set(redis, error));
  redis.on("ready", () => lastErrors.delete(redis));
  return redis;
}

const sentinelErrors = new WeakMap<Redis, Error>();

/**
 * Resolves when `redis` answers PING. With sentinels ioredis keeps asking them for a master
 * forever without failing a command; the start stops at the first round in which none gave one.
 */
export async function firstAnswer(redis: Redis, target: RedisTarget): Promise<void> {
  if (!target.sentinels) {
    await redis.ping();
    return;
  }
  let onError: (error: Error) => void = () => undefined;
  const noMaster = new Promise<never>((_, reject) => {
    onError = (error) => {
      if (!error.message.startsWith("All sentinels are unreachable")) return;
      const said = sentinelErrors.get(redis)?.message ?? "";
      const sentinel = /sentinel (\S+)/.exec(said)?.[1];
      if (/No such master|invalid reply: null/.test(said)) {
        reject(
          new RedisSetupError(
            `the sentinel ${sentinel} watches no master of that name (SENTINEL MASTERS lists those it does)`,
            "REDIS_SENTINEL_NAME",
          ),
        );
      }
      if (/because (NOAUTH|WRONGPASS)/.test(said)) {
        const reason = /because (.*)$/.exec(said)?.[1];
        reject(
          new RedisSetupError(
            `the sentinel ${sentinel} refused the connection (${reason}); give the sentinels' requirepass`,
            "REDIS_SENTINEL_PASSWORD",
          ),
        );
      }
      reject(Object.assign(new Error(`${target.where} did not answer: ${said || error.message}`), { code: "REDIS_UNREACHABLE" }));
    };
    redis.on("error", onError);
  });
  try {
    await Promise.race([redis.ping(), noMaster]);
  } finally {
    redis.off("error", onError);
  }
}

/** Moves a fresh connection to REDIS_URL's database, or says that the server has no such database. */
export async function selectDb(redis: Redis, url: string): Promise<void> {
  const db = redisDb(url);
  if (db === 0) return;
  try {
    // ioredis selects it on every (re)connection; this asks once more to learn that the server has it.
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
  /** A node of a Redis Cluster (`cluster_enabled:1`). */
  cluster: boolean;
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
    cluster: field("cluster_enabled") === "1",
  };
}

/**
 * The settings the service needs of Redis (docs/storage.md "Redis in production"): not a node of
 * a Redis Cluster (RedisSetupError, not MOVED at the first request); it holds
 * the only copy of accounts, keys and balances, so Redis must never evict them. A
 * `maxmemory-policy` other than `noeviction` stops the start (RedisSetupError) unless
 * `allowEviction` (REDIS_ALLOW_EVICTION=true); data kept only in memory (no AOF, no RDB save
 * points) is a warning. Returns the warnings.
 */
export function checkServer(facts: RedisServerFacts, where: string, allowEviction: boolean): string[] {
  const notices: string[] = [];
  if (facts.cluster) {
    // Its scripts and transactions would answer CROSSSLOT, its other keys MOVED, at the first request.
    throw new RedisSetupError(
      `${where} is a node of a Redis Cluster (cluster_enabled:1), which the service cannot use yet: its ledger scripts, ` +
        'record writes and event publishes touch keys of several slots in one step (docs/storage.md "Redis Cluster"); ' +
        "use one Redis, with Sentinel (REDIS_SENTINELS) for failover",
    );
  }
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
      `${where} keeps nothing on disk (appendonly no, no save points): a restart of Redis loses every user, key and ` +
        'balance; turn on appendonly yes (docs/storage.md "Redis in production")',
    );
  }
  return notices;
}
