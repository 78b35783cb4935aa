import * as v from "valibot";
import { addSecret } from "./outbound/secrets.js";
import { maskUrlPasswords } from "../storage/mask.js";
import { redisUrlProblem } from "../storage/redis-setup.js";

/**
 * Every environment variable the service reads, with its default and the reason for it.
 * `loadConfig` validates them all at start: a bad value stops the start with a message
 * naming the variable. docs/configuration.md is the user-facing copy of this list.
 */
const intFrom = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  v.pipe(v.string(), v.regex(/^\d+$/, "must be a whole number"), v.transform(Number), v.minValue(min), v.maxValue(max));

/** A `true`/`false` setting, read as a boolean, `fallback` when unset. */
const flag = (fallback: "true" | "false") =>
  v.optional(
    v.pipe(
      v.picklist(["true", "false"], "must be true or false"),
      v.transform((value) => value === "true"),
    ),
    fallback,
  );

/**
 * An outbound or published address: an absolute http:// or https:// URL. Anything else
 * (ftp://, file://, javascript:, a ws:// where HTTP is spoken) stops the start with a message.
 */
const httpUrl = () =>
  v.pipe(
    v.string(),
    v.url("must be an absolute URL"),
    v.check((value) => !URL.canParse(value) || /^https?:$/.test(new URL(value).protocol), "must be an http:// or https:// URL"),
  );

const ENV_SCHEMA = v.object({
  /** Port of the one HTTP server carrying every surface. */
  PORT: v.optional(intFrom(0, 65535), "8787"),
  /**
   * Processes serving the one port (docs/operating.md "Every core"): `1` (one process), a
   * number, or `auto` (one per core the host gives this process). Above 1 they are
   * node:cluster workers sharing state through Redis, so it needs STORAGE=redis.
   */
  WORKERS: v.optional(
    v.union(
      [
        v.literal("auto"),
        v.pipe(
          v.string(),
          v.regex(/^\d+$/, "must be a whole number or auto"),
          v.transform(Number),
          v.minValue(1, "must be at least 1"),
          v.maxValue(256, "must be at most 256"),
        ),
      ],
      "must be a whole number from 1 to 256, or auto",
    ),
    "1",
  ),
  /** Interface to bind. Loopback by default so a first `npm start` is not exposed. */
  HOST: v.optional(v.pipe(v.string(), v.minLength(1)), "127.0.0.1"),
  /** Public origin used in printed URLs and metadata documents (defaults to http://HOST:PORT). */
  PUBLIC_URL: v.optional(httpUrl()),
  /**
   * Host names (with or without port) requests may carry in `Host`, comma-separated, for
   * deployments behind a proxy. Unset: when bound to a loopback address only loopback names
   * and PUBLIC_URL's host are served (DNS-rebinding protection, MCP "Security Warning");
   * bound elsewhere, any.
   */
  ALLOWED_HOSTS: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** Persistence driver: `fs` keeps everything under DATA_DIR; `redis` shares state between instances. */
  STORAGE: v.optional(v.picklist(["memory", "fs", "redis"], "must be memory, fs or redis"), "fs"),
  DATA_DIR: v.optional(v.pipe(v.string(), v.minLength(1)), "./data"),
  /**
   * `redis[s]://[[user]:password@]host[:port][/db]`, checked whole at start (docs/storage.md "Redis in
   * production"); its password is masked wherever the URL is printed.
   */
  REDIS_URL: v.optional(
    v.pipe(
      v.string(),
      v.check(
        (value) => redisUrlProblem(value) === undefined,
        (issue) => redisUrlProblem(String(issue.input)) ?? "invalid",
      ),
    ),
    "redis://127.0.0.1:6379",
  ),
  /**
   * Run on a Redis whose maxmemory-policy evicts keys. Off: the start refuses such a Redis,
   * which would silently drop users, keys and balances under memory pressure.
   */
  REDIS_ALLOW_EVICTION: flag("false"),
  /**
   * TLS to Redis (REDIS_URL rediss://, docs/storage.md "TLS, Sentinel and Cluster"): the CA that
   * signed the server's certificate, and the client certificate and key a Redis with
   * `tls-auth-clients yes` asks for, each as PEM text (`\n` escapes allowed) or a file (`_FILE`).
   * Read and checked at start (storage/redis-setup.ts).
   */
  REDIS_TLS_CA: v.optional(v.string()),
  REDIS_TLS_CA_FILE: v.optional(v.string()),
  REDIS_TLS_CERT: v.optional(v.string()),
  REDIS_TLS_CERT_FILE: v.optional(v.string()),
  REDIS_TLS_KEY: v.optional(v.string()),
  REDIS_TLS_KEY_FILE: v.optional(v.string()),
  /**
   * Redis behind Sentinel: the sentinels (`host:port,host:port`) and the name of the master they
   * watch. REDIS_URL then gives only the scheme, user, password and database; its host is not used.
   */
  REDIS_SENTINELS: v.optional(v.string()),
  REDIS_SENTINEL_NAME: v.optional(v.string()),
  /** The sentinels' own password (`requirepass` in sentinel.conf), when they have one. */
  REDIS_SENTINEL_PASSWORD: v.optional(v.string()),
  /** Key prefix inside Redis, so several deployments can share one server. */
  REDIS_PREFIX: v.optional(v.pipe(v.string(), v.regex(/^[\w.-]+$/, "letters, digits, _ . - only")), "gw"),
  /**
   * Deadline of one storage command in milliseconds (docs/storage.md "When Redis stops
   * answering"): a Redis that does not answer within it fails the request with 503 instead of
   * holding it. The bus's subscriber and blocking reads are not bounded by it.
   */
  STORAGE_TIMEOUT_MS: v.optional(intFrom(10, 600_000), "5000"),
  /** HS256 secret for session tokens; at least 32 characters. Generated into DATA_DIR when unset (fs only). */
  GATEWAY_JWT_SECRET: v.optional(v.pipe(v.string(), v.minLength(32, "must be at least 32 characters"))),
  /**
   * Secret from which the key that encrypts secrets at rest (upstream MCP server headers,
   * credential-like values in tool plans) is derived; at least 32 characters. Generated into
   * DATA_DIR when unset (fs only); required with STORAGE=redis so every instance reads the same data.
   */
  DATA_ENCRYPTION_SECRET: v.optional(v.pipe(v.string(), v.minLength(32, "must be at least 32 characters"))),
  /** Lifetime of a session token in seconds. */
  SESSION_TTL_SECONDS: v.optional(intFrom(60, 60 * 60 * 24 * 30), "43200"),
  /** Service name inside platform keys: `sk-<name>-…` (docs/interface.md 5). */
  PLATFORM_KEY_SERVICE: v.optional(v.pipe(v.string(), v.regex(/^[a-z0-9]+$/, "lowercase letters and digits only")), "gateway"),
  /** Fixed prefix of personal (Account API) keys; must end with an underscore (docs/interface.md 5). */
  ACCOUNT_KEY_PREFIX: v.optional(v.pipe(v.string(), v.regex(/^[a-z][a-z0-9]*_$/, "lowercase, ending in _")), "acct_"),
  /**
   * Failed sign-ins allowed per email and source address per LOGIN_WINDOW_SECONDS (ten times as
   * many per email across addresses) before attempts take the slow path: LOGIN_SLOW_MS each, one
   * at a time per email; the right password still signs in (docs/security.md "Sign-in throttling").
   */
  LOGIN_MAX_FAILURES: v.optional(intFrom(1, 1000), "5"),
  LOGIN_WINDOW_SECONDS: v.optional(intFrom(1, 86400), "900"),
  LOGIN_SLOW_MS: v.optional(intFrom(0, 60_000), "2000"),
  /**
   * Password hashes (scrypt) run at once, process-wide; the rest wait their turn. scrypt shares
   * libuv's thread pool with fs, so an unbounded login flood stalls storage. `0` = unbounded.
   */
  PASSWORD_HASH_CONCURRENCY: v.optional(intFrom(0, 64), "2"),
  /**
   * scrypt's cost for new password hashes, N = 2^this (docs/security.md). Keep 17 (OWASP) in
   * production; the test suite lowers it to 14 to register hundreds of users quickly.
   */
  PASSWORD_SCRYPT_LOG2N: v.optional(intFrom(14, 20), "17"),
  /** Largest request body accepted on any surface (docs/interface.md 8: 1 MiB). */
  GATEWAY_MAX_PAYLOAD_BYTES: v.optional(intFrom(1024), "1048576"),
  /**
   * Slow clients (docs/security.md "Slow clients"): a request's headers must arrive within
   * HTTP_HEADERS_TIMEOUT_SECONDS and the whole request (headers and body) within
   * HTTP_REQUEST_TIMEOUT_SECONDS; a body that stops arriving for HTTP_BODY_IDLE_TIMEOUT_SECONDS
   * is cut. Answers are not bounded by these: an SSE stream or a WebSocket, once established,
   * stays open.
   */
  HTTP_HEADERS_TIMEOUT_SECONDS: v.optional(intFrom(1, 600), "10"),
  HTTP_REQUEST_TIMEOUT_SECONDS: v.optional(intFrom(1, 3600), "60"),
  HTTP_BODY_IDLE_TIMEOUT_SECONDS: v.optional(intFrom(1, 600), "10"),
  /**
   * Request bodies one client (remote address) may have arriving at once on an instance; past
   * it, 429 before the body is read (docs/quotas.md "Bodies being read"). Behind a proxy every
   * client has the proxy's address: raise it, or 0 for unbounded, and bound clients at the proxy.
   */
  HTTP_BODIES_PER_CLIENT: v.optional(intFrom(0, 1_000_000), "64"),
  /** Upper bound in seconds for a tool call or upstream request made by the bridge (docs/interface.md 8). */
  GATEWAY_TIMEOUT_SECONDS: v.optional(intFrom(1, 3600), "30"),
  /** Retries of idempotent upstream calls (docs/interface.md 8). */
  GATEWAY_MAX_RETRIES: v.optional(intFrom(0, 10), "2"),
  /** Requests per minute per credential on the bridge, shared across instances (docs/interface.md 8). */
  GATEWAY_RATE_LIMIT_RPM: v.optional(intFrom(1, 1_000_000), "120"),
  /**
   * Requests per minute per credential on the Gateway API (`/gateway/v1`, the agent stream and
   * `/rpc`), shared across instances (docs/interface.md 8, docs/rate-limits.md).
   */
  GATEWAY_API_RATE_LIMIT_RPM: v.optional(intFrom(1, 1_000_000), "600"),
  /**
   * Requests per minute per tenant on the Gateway API, all of its users and keys together
   * (a call counts against the tenant it names, else its caller's personal tenant), shared
   * across instances (docs/quotas.md, docs/rate-limits.md).
   */
  GATEWAY_TENANT_RATE_LIMIT_RPM: v.optional(intFrom(1, 100_000_000), "3000"),
  /**
   * Quotas (docs/quotas.md): how much one user or tenant may hold at once, enforced across
   * instances; past one, a create is refused with 409 (a stream with 429).
   * Live (unrevoked, unexpired) API keys one user has created, of every kind: gateway keys,
   * personal keys and the platform keys they made in their tenants' workspaces.
   */
  QUOTA_KEYS_PER_USER: v.optional(intFrom(0, 1_000_000), "50"),
  /** VM-agent sockets one tenant may have open across instances (a VM reconnecting keeps its place). */
  QUOTA_VM_SOCKETS_PER_TENANT: v.optional(intFrom(0, 1_000_000), "50"),
  /** Tools one tenant's connected VMs may announce in total (`tools/register`). */
  QUOTA_VM_TOOLS_PER_TENANT: v.optional(intFrom(0, 10_000_000), "5000"),
  /** Upstream MCP servers one tenant may register (servers operators share do not count). */
  QUOTA_MCP_SERVERS_PER_TENANT: v.optional(intFrom(0, 100_000), "20"),
  /** Webhook subscriptions one tenant may have. */
  QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT: v.optional(intFrom(0, 1_000_000), "100"),
  /**
   * Streams in flight per credential (an API key, or a signed-in user's session): streamed chat
   * answers and streamed agent invocations. Generous: a customer's backend may serve many of its
   * own users through one key; the per-user and per-tenant bounds below protect the service.
   */
  QUOTA_STREAMS_PER_KEY: v.optional(intFrom(0, 1_000_000), "100"),
  /** Streams in flight per user, all of their keys and sessions together (a user may have QUOTA_KEYS_PER_USER keys). */
  QUOTA_STREAMS_PER_USER: v.optional(intFrom(0, 1_000_000), "200"),
  /** Streams in flight per tenant, all of its users together. */
  QUOTA_STREAMS_PER_TENANT: v.optional(intFrom(0, 1_000_000), "500"),
  /** Agent stream sockets (`/gateway/v1/agents/stream`) one user may have open across instances. */
  QUOTA_AGENT_SOCKETS_PER_USER: v.optional(intFrom(0, 1_000_000), "50"),
  /** Agent stream sockets one tenant may have open across instances, all of its users together. */
  QUOTA_AGENT_SOCKETS_PER_TENANT: v.optional(intFrom(0, 1_000_000), "200"),
  /** Lease of a stream's place: renewed every half lease while it runs, so the places of an instance that died are free again after this. */
  QUOTA_STREAM_LEASE_SECONDS: v.optional(intFrom(2, 3600), "15"),
  /**
   * Lease of an agent run's place among its agent's runs in flight: renewed every third of it
   * while the run goes on, so an agent whose run was on an instance that died is no longer
   * `running` (and can be deleted or deployed) this long after (docs/agents.md "Status").
   */
  AGENT_RUN_LEASE_SECONDS: v.optional(intFrom(2, 3600), "15"),
  /** Allowed browser origins, comma-separated, or `*` (docs/interface.md 8). Also the MCP endpoint's Origin allowlist. */
  GATEWAY_CORS_ORIGINS: v.optional(
    v.pipe(
      v.string(),
      v.minLength(1),
      v.check(
        (value) => value.split(",").every((entry) => entry.trim() === "*" || /^https?:\/\/[^/\s,]+\/?$/.test(entry.trim())),
        "each entry must be * or an origin such as https://app.example.com (scheme, host and optional port, no path)",
      ),
    ),
    "*",
  ),
  /** Orchestrator base URL; when set, Gateway agents are proxied to it by name (docs/interface.md 4.4). */
  ORCH_BASE_URL: v.optional(httpUrl()),
  /** Manager (billing and usage) base URL for the Gateway's billing proxy. */
  MANAGER_BASE_URL: v.optional(httpUrl()),
  /** Secret for service-to-service tokens the bridge accepts from internal services. */
  SERVICE_JWT_SECRET: v.optional(v.pipe(v.string(), v.minLength(32, "must be at least 32 characters"))),
  /** A key internal services present to the bridge (`Authorization: Bearer`), e.g. for /bridge/tools/execute. */
  PLATFORM_SERVICE_KEY: v.optional(v.pipe(v.string(), v.minLength(24, "must be at least 24 characters"))),
  /** VM-agent heartbeat: the bridge pings each VM socket this often; a VM silent for two intervals is dropped. */
  VM_HEARTBEAT_SECONDS: v.optional(intFrom(1, 3600), "30"),
  /** JSON file mapping model ids to providers (docs/models-and-chat.md). Unset: MODELS_JSON, else the built-in `echo-1`. */
  MODELS_FILE: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** The same models document inline; its ids override the file's. */
  MODELS_JSON: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** Seconds to wait for an upstream model's first byte, and between streamed chunks (a model may override). */
  MODEL_TIMEOUT_SECONDS: v.optional(intFrom(1, 3600), "60"),
  /**
   * Lease of a credit hold (docs/models-and-chat.md "Holds"): a hold whose process died is
   * released this long after it was placed or last renewed. A request in flight renews its
   * holds every half lease, so only a dead process's holds ever expire.
   */
  HOLD_LEASE_SECONDS: v.optional(intFrom(5, 86_400), "30"),
  /** How long a model's active health probe is reused, shared by every instance (docs/model-registry.md). */
  MODEL_HEALTH_TTL_SECONDS: v.optional(intFrom(1, 86400), "30"),
  /** Time an active probe (the upstream's models list) may take before the model counts as down; over half of it is degraded. */
  MODEL_HEALTH_PROBE_TIMEOUT_MS: v.optional(intFrom(50, 60_000), "5000"),
  /** Days telemetry events and their counts are kept (docs/telemetry.md). */
  TELEMETRY_RETENTION_DAYS: v.optional(intFrom(1, 3650), "30"),
  /** Telemetry events a tenant may send per minute, shared across instances; past it a batch gets 429. */
  TELEMETRY_INGEST_PER_MINUTE: v.optional(intFrom(1, 100_000_000), "60000"),
  /** Account API plans as JSON `{"<plan>": {tokensPerWindow, windowSeconds, name?}}` (docs/models-and-chat.md); unset: built-in free and pro. A model lists its plans in the models document. */
  PLANS_JSON: v.optional(v.pipe(v.string(), v.minLength(1))),
  /**
   * Model that plans tool calls for POST /mcp/plan (docs/routing.md). Unset: the first public
   * openai-compatible model, if any; `none`: plans always come from the tool ranking.
   */
  ROUTER_MODEL: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** Most steps a tool plan may have (POST /mcp/plan `maxSteps` is capped at this). */
  ROUTER_MAX_STEPS: v.optional(intFrom(1, 100), "10"),
  /** Allow upstream MCP servers (POST /mcp/servers) on private or loopback addresses. Off: a registration must not reach inside the deployment (SSRF). */
  MCP_SERVERS_ALLOW_PRIVATE: flag("false"),
  /** An MCP session (Mcp-Session-Id) with no request and no open GET stream for this long ends; the client initializes again (404). */
  MCP_SESSION_IDLE_SECONDS: v.optional(intFrom(10, 7 * 24 * 3600), "1800"),
  /** Open MCP sessions one user may hold on an instance; opening one more ends that user's least recently used session (its next request gets 404). */
  MCP_MAX_SESSIONS_PER_USER: v.optional(intFrom(1, 100_000), "100"),
  /**
   * Upstream sessions of their own (MCP sessions declaring sampling, elicitation or roots) one
   * user may hold on an instance, across servers; past it the shared connection serves
   * (docs/mcp.md "Upstream sessions").
   */
  MCP_UPSTREAM_SESSIONS_PER_USER: v.optional(intFrom(0, 100_000), "20"),
  /** Such upstream sessions one upstream server may be given on an instance, across users. */
  MCP_UPSTREAM_SESSIONS_PER_SERVER: v.optional(intFrom(0, 100_000), "200"),
  /**
   * Advertise the authorization server to MCP clients (docs/mcp.md "Discovery"): the
   * protected-resource metadata with `authorization_servers`, the authorization server's
   * metadata, and `resource_metadata` and `scope` in a 401's `WWW-Authenticate`. `false` answers
   * those documents 404 and a 401 without them, so clients that turn to OAuth on seeing them
   * (Claude Code, Cursor) keep using a configured `Authorization` header; tokens already issued
   * keep working.
   */
  OAUTH_DISCOVERY: flag("true"),
  /** Life of an access token of the authorization server, in seconds (short: a stolen one is soon useless; clients refresh). */
  OAUTH_ACCESS_TOKEN_SECONDS: v.optional(intFrom(30, 86_400), "600"),
  /**
   * Days a refresh token may go unused; each use rotates it (a new token with this life). A
   * consent itself lasts a year, then the user is asked again (docs/mcp.md "Tokens").
   */
  OAUTH_REFRESH_TOKEN_DAYS: v.optional(intFrom(1, 365), "30"),
  /** Days one key signs access tokens before the next one takes over (docs/mcp.md "Signing keys"). */
  OAUTH_SIGNING_KEY_DAYS: v.optional(intFrom(1, 365), "30"),
  /** Accept Dynamic Client Registration (RFC 7591) at /oauth/register; `false` leaves Client ID Metadata Documents and clients an operator registered. */
  OAUTH_DYNAMIC_REGISTRATION: flag("true"),
  /** Days a dynamically registered client that is not used is kept (each use extends it). */
  OAUTH_DYNAMIC_CLIENT_DAYS: v.optional(intFrom(1, 3650), "90"),
  /** Client registrations (RFC 7591) one address may make per hour (429 past it). */
  OAUTH_REGISTRATIONS_PER_HOUR: v.optional(intFrom(1, 100_000), "60"),
  /**
   * Fetch Client ID Metadata Documents from private or loopback addresses. Off: a `client_id`
   * URL must not make the service reach inside the deployment (SSRF); checked at connection time.
   */
  OAUTH_CLIENT_METADATA_ALLOW_PRIVATE: flag("false"),
  /** `limits.agents` of a tenant made without limits: a personal tenant created on first use, or POST /tenants without `limits` (docs/agents.md). */
  TENANT_DEFAULT_AGENT_LIMIT: v.optional(intFrom(0, 1_000_000), "25"),
  /** `limits.tokensPerMonth` of such a tenant: model tokens its agent invocations may use per calendar month (UTC). */
  TENANT_DEFAULT_TOKENS_PER_MONTH: v.optional(intFrom(0), "2000000"),
  /** `config.maxSteps` of an agent created without one: rounds of tool calls before a run ends with `max_steps`. */
  AGENT_DEFAULT_MAX_STEPS: v.optional(intFrom(1, 100), "8"),
  /** Log lines kept per agent (GET /agents/{id}/logs); older lines are dropped. */
  AGENT_LOG_MAX_ENTRIES: v.optional(intFrom(10, 1_000_000), "1000"),
  /** Deliveries of one event to one consumer group before it is dead-lettered (docs/events.md). */
  EVENTS_MAX_DELIVERIES: v.optional(intFrom(1, 1000), "5"),
  /** Seconds events are kept on the bus (Redis: MINID trimming of the streams); default 7 days. */
  EVENTS_RETENTION: v.optional(intFrom(60), "604800"),
  /** Largest JSON `payload` of a published event, in bytes. */
  EVENTS_MAX_PAYLOAD_BYTES: v.optional(intFrom(2, 1_048_576), "65536"),
  /** Allow webhook URLs on private or loopback addresses. Off: a subscription must not reach inside the deployment (SSRF); checked at creation and at every delivery. */
  WEBHOOKS_ALLOW_PRIVATE: flag("false"),
  /** Seconds a webhook receiver has to answer one attempt. */
  WEBHOOKS_TIMEOUT_SECONDS: v.optional(intFrom(1, 120), "15"),
  /**
   * Fair delivery (docs/webhooks.md): webhook attempts and fan-outs run at most
   * WEBHOOKS_CONCURRENCY at a time per instance, at most WEBHOOKS_TENANT_CONCURRENCY of one
   * tenant, tenants in turn.
   */
  WEBHOOKS_CONCURRENCY: v.optional(intFrom(1, 1024), "32"),
  WEBHOOKS_TENANT_CONCURRENCY: v.optional(intFrom(1, 1024), "4"),
  /**
   * Worker threads that make the webhook attempts (signature, request, answer), so they do not
   * share the event loop with the requests the service serves; 0 makes them on that loop
   * (docs/webhooks.md "Delivery threads").
   */
  WEBHOOKS_SEND_THREADS: v.optional(intFrom(0, 16), "1"),
  /**
   * Seconds an instance's claim on an attempt or a fan-out lasts, renewed while it runs: one
   * that dies gives its work up to another instance within this.
   */
  WEBHOOKS_LEASE_SECONDS: v.optional(intFrom(1, 600), "5"),
  /** How often each instance looks for due webhook deliveries, in ms; 0 turns the background loop off (attempts then run on dispatch, retry, or an explicit tick). */
  WEBHOOKS_POLL_MS: v.optional(intFrom(0, 3_600_000), "1000"),
  /**
   * Seconds a stopping process (SIGTERM/SIGINT) lets in-flight requests and streams finish
   * before it cuts them; below the usual 30 s an orchestrator waits before SIGKILL.
   */
  SHUTDOWN_GRACE_SECONDS: v.optional(intFrom(0, 3600), "25"),
  /** Bearer token GET /metrics requires when set; unset, /metrics is open (scrape it on a private port or network). */
  METRICS_TOKEN: v.optional(v.pipe(v.string(), v.minLength(16, "must be at least 16 characters"))),
  /** `info` writes one JSON line per request; `silent` writes none. */
  LOG_LEVEL: v.optional(v.picklist(["info", "error", "silent"], "must be info, error or silent"), "info"),
});

export type Config = v.InferOutput<typeof ENV_SCHEMA>;
export const CONFIG_KEYS = Object.keys(ENV_SCHEMA.entries) as (keyof Config)[];

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    // One line, so a failed start reads as one log line; never a URL's password nor a piece of
    // a JSON setting (which may hold a key) that the JSON parser quoted in its message.
    const masked = problems.map((problem) => maskUrlPasswords(withoutJsonExcerpt(problem)));
    super(`Invalid configuration: ${masked.join("; ")}`);
    this.problems = masked;
    this.name = "ConfigError";
  }
}

/** Reads the known variables from `env` (empty strings count as unset). */
export function loadConfig(env: Record<string, string | undefined> = process.env, overrides: Partial<Config> = {}): Config {
  const picked: Record<string, string> = {};
  for (const key of CONFIG_KEYS) {
    const value = env[key];
    if (value !== undefined && value !== "") picked[key] = value;
  }
  const result = v.safeParse(ENV_SCHEMA, picked);
  if (!result.success) {
    throw new ConfigError(
      result.issues.map((issue) => {
        const key = v.getDotPath(issue) ?? "?";
        return `${key}=${shown(key, issue.input)}: ${issue.message}`;
      }),
    );
  }
  // The service's own secrets never leave it through an upstream's echo (rpc/outbound/secrets.ts).
  for (const key of CONFIG_KEYS) if (SECRET_KEY.test(key)) addSecret(picked[key]);
  return { ...result.output, ...overrides };
}

/**
 * V8's JSON.parse messages quote the text around the fault (`Unexpected token 's', "…"… is not
 * valid JSON`): the quote goes, the fault and its position stay.
 */
function withoutJsonExcerpt(problem: string): string {
  return problem.replace(
    /,?\s*(?:\.\.\.)?"(?:[^"\\]|\\.|"(?!(?:\.\.\.)? is not valid JSON))*"(?:\.\.\.)? is not valid JSON/g,
    " (the text is not shown)",
  );
}

/** Settings that hold secrets: a start-up error names them and their length, never their value. */
const SECRET_KEY = /SECRET|PASSWORD|_KEY$|TOKEN/;

/** A setting's value as a start-up error shows it: a secret's length only, a URL without its password. */
function shown(key: string, input: unknown): string {
  if (typeof input !== "string") return JSON.stringify(input);
  if (SECRET_KEY.test(key)) return `<${input.length} characters, not shown>`;
  return maskUrlPasswords(JSON.stringify(input));
}
