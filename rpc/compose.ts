import { startTracing } from "./tracing-sdk.js";
import { randomBytes } from "node:crypto";
import { ConfigError, type Config } from "./config.js";
import type { Logger } from "./log.js";
import { keyPrefixes } from "./credentials/api-keys.js";
import { SessionTokens } from "./credentials/sessions.js";
import { setHashConcurrency, setHashCost } from "./credentials/passwords.js";
import { systemResolver, type ResolveHost } from "./outbound/outbound-guard.js";
import { Dispatcher } from "./dispatcher.js";
import { EventSink } from "./event-sink.js";
import { Metrics } from "./metrics.js";
import type { AnyDomainModule, CorePorts, DomainExports, Ports } from "./module.js";
import { modulesFor, type ServiceMethod } from "./modules.js";
import { createRegistry } from "./registry.js";
import { openRepos } from "./repos.js";
import type { OpenToolBridge } from "./tools/ports.js";
import { openStore } from "../storage/store.js";
import { SecretBox } from "../storage/secret-box.js";
import type { EventLog } from "../storage/events/event-log.js";
import { LocalEventLog } from "../storage/events/local-event-log.js";
import { RedisEventLog } from "../storage/events/redis-event-log.js";
import { RevokedSessionsRepo } from "../storage/repos/revoked-sessions.js";
import { OAuthKeysRepo } from "../storage/repos/oauth-keys.js";
import { OAuthConsentsRepo } from "../storage/repos/oauth-consents.js";
import { OAuthKeyRing } from "./credentials/oauth-keys.js";
import { AccessTokenVerifier } from "./credentials/oauth-tokens.js";

export interface ComposeOptions {
  /** Name resolution for guarded outbound connections (default: the system resolver). */
  resolveHost?: ResolveHost;
  /** STORAGE=fs, DATA_DIR owned by a running server: fail (a server) or go through it (the admin command). */
  whenDataDirOwned?: "fail" | "connect";
}

/** The running service below its transports: the core's ports, each domain's deps, the dispatcher. */
export interface Composition {
  readonly ports: Ports;
  readonly dispatcher: Dispatcher<ServiceMethod>;
  /** A domain module's deps by its name (tests and the admin command reach repositories and workers here). */
  deps<T = unknown>(domain: string): T;
  /** Waits for pending event publishes, closes the modules in reverse order, then the bus, the bridge, and storage last. */
  close(): Promise<void>;
}

/**
 * The composition root below the transports (facade/server.ts, the admin command and the test
 * helpers call it): validates the modules' configuration, opens storage, builds the core's
 * ports, opens the tool bridge, initialises the domain modules in their declared order
 * (rpc/modules.ts) and builds the dispatcher over their methods. Closing runs in reverse.
 */
export async function compose(config: Config, log: Logger, openTools: OpenToolBridge, options: ComposeOptions = {}): Promise<Composition> {
  const modules = modulesFor(config);
  // Validated before storage opens: a bad models or plans document stops the start (ConfigError).
  for (const module of modules) module.check?.(config);
  const resolveHost = options.resolveHost ?? systemResolver;
  // Process-wide, like the thread pool it protects.
  setHashConcurrency(config.PASSWORD_HASH_CONCURRENCY);
  setHashCost(config.PASSWORD_SCRYPT_LOG2N);
  // Traces (OTEL_* variables, rpc/tracing-sdk.ts): flushed once everything else closed, before storage.
  const stopTracing = await startTracing(log);
  const store = await openStore(config, { whenOwned: options.whenDataDirOwned ?? "fail" }).catch(async (error: unknown) => {
    await stopTracing?.();
    throw error;
  });
  const closers: (() => Promise<void> | void)[] = [() => store.close()];
  if (stopTracing) closers.push(stopTracing);
  const closeAll = async () => {
    for (const fn of closers.splice(0).reverse()) await fn();
  };
  try {
    // What the start found worth saying once (docs/storage.md "Redis in production").
    for (const notice of store.notices) log.warn({ event: "storage.notice", msg: notice });
    const metrics = new Metrics();
    metrics.observeStorage(store.kv);
    const secret = await requiredSecret(config, store, "GATEWAY_JWT_SECRET", "jwt-secret", "so each verifies the others' tokens");
    const dataSecret = await requiredSecret(
      config,
      store,
      "DATA_ENCRYPTION_SECRET",
      "data-encryption-secret",
      "so each reads the secrets the others stored",
    );
    const secrets = new SecretBox(dataSecret);
    const eventOptions = { maxDeliveries: config.EVENTS_MAX_DELIVERIES, retentionMs: config.EVENTS_RETENTION * 1000 };
    const eventLog: EventLog =
      store.driver === "redis" && store.duplicateRedis
        ? new RedisEventLog(store.duplicateRedis("events"), config.REDIS_PREFIX, eventOptions)
        : new LocalEventLog(store.kv, { ...eventOptions, persist: store.driver === "fs" });
    const sink = new EventSink(eventLog, log);
    // Events the bridge observes (a VM leaving, an upstream server's health) go on the bus.
    const tools = await openTools({
      config,
      log,
      store,
      secrets,
      resolveHost,
      emit: (tenantId, type, data) => sink.emit(tenantId, type, data),
      metrics,
    });
    closers.push(() => tools.close());
    metrics.gauge("gateway_vm_sockets", "VM-agent sockets connected to this instance", () => tools.vms.stats().connected);
    closers.push(() => eventLog.close());
    // Events emitted while the modules close still reach the bus before it closes.
    closers.push(() => sink.drain());

    const exported: Partial<DomainExports> = { bridge: tools };
    // docs/mcp.md "Signing keys": one key set in storage, rotated by whichever instance sees it due.
    const oauthKeys = new OAuthKeyRing(new OAuthKeysRepo(store.atomic, secrets), {
      rotationMs: config.OAUTH_SIGNING_KEY_DAYS * 86_400_000,
      tokenLifetimeMs: config.OAUTH_ACCESS_TOKEN_SECONDS * 1000,
    });
    const ports: Ports = {
      config,
      log,
      metrics,
      store,
      repos: openRepos(store, secrets, { telemetryRetentionDays: config.TELEMETRY_RETENTION_DAYS }),
      secrets,
      resolveHost,
      eventLog,
      sink,
      sessions: new SessionTokens(secret, config.SESSION_TTL_SECONDS, new RevokedSessionsRepo(store.atomic)),
      oauthKeys,
      accessTokens: new AccessTokenVerifier(oauthKeys, new OAuthConsentsRepo(store.atomic)),
      keyPrefixes: keyPrefixes(config.PLATFORM_KEY_SERVICE, config.ACCOUNT_KEY_PREFIX),
      use(name) {
        const port = exported[name];
        if (port === undefined) throw new Error(`No module before this one exports "${name}": check the order in rpc/modules.ts`);
        return port as DomainExports[typeof name];
      },
      onClose(fn) {
        closers.push(fn);
      },
    };
    const deps = new Map<string, unknown>();
    for (const module of modules) await initModule(module, ports, deps, exported, closers);
    // Closing starts by waiting for the events the last calls emitted (webhooks still fan them out).
    closers.push(() => sink.drain());

    const core: CorePorts = {
      ...pickCore(ports),
      users: ports.repos.users,
      keys: ports.repos.keys,
      tenants: ports.repos.tenants,
      members: ports.repos.members,
    };
    const dispatcher = new Dispatcher(createRegistry(modules.flatMap((module): readonly ServiceMethod[] => module.methods)), core, deps);
    return {
      ports,
      dispatcher,
      deps<T>(domain: string) {
        if (!deps.has(domain)) throw new Error(`No domain module named ${domain}`);
        return deps.get(domain) as T;
      },
      close: closeAll,
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

async function initModule(
  module: AnyDomainModule,
  ports: Ports,
  deps: Map<string, unknown>,
  exported: Partial<DomainExports>,
  closers: (() => Promise<void> | void)[],
): Promise<void> {
  const built = await module.init(ports);
  deps.set(module.name, built);
  if (module.close) closers.push(() => module.close!(built));
  Object.assign(exported, module.provides?.(built) ?? {});
}

function pickCore(ports: Ports) {
  const { config, log, metrics, store, sessions, oauthKeys, accessTokens, keyPrefixes, onClose } = ports;
  return { config, log, metrics, store, sessions, oauthKeys, accessTokens, keyPrefixes, onClose };
}

/**
 * A secret from the configuration, else the one the store persisted (fs), else a fresh one
 * (memory: nothing outlives the process). Redis needs it configured: every instance must share it.
 */
async function requiredSecret(
  config: Config,
  store: Awaited<ReturnType<typeof openStore>>,
  name: "GATEWAY_JWT_SECRET" | "DATA_ENCRYPTION_SECRET",
  persisted: string,
  why: string,
): Promise<string> {
  const value = config[name] ?? (await store.persistentSecret(persisted));
  if (value) return value;
  if (config.STORAGE === "redis")
    throw new ConfigError([`${name} is required with STORAGE=redis: set the same secret (32+ characters) on every instance, ${why}`]);
  return randomBytes(32).toString("base64url");
}
