import { randomBytes } from "node:crypto";
import { ConfigError, type Config } from "./config.js";
import type { Logger } from "./log.js";
import { keyPrefixes, type KeyPrefixes } from "./credentials/api-keys.js";
import { SessionTokens } from "./credentials/sessions.js";
import { setHashConcurrency } from "./credentials/passwords.js";
import { systemResolver, type ResolveHost } from "./policies/outbound-guard.js";
import { openStore, type Store } from "../storage/store.js";
import { UsersRepo } from "../storage/repos/users.js";
import { KeysRepo } from "../storage/repos/keys.js";
import { TenantsRepo } from "../storage/repos/tenants.js";
import { MembersRepo } from "../storage/repos/members.js";
import { ArtifactsRepo } from "../storage/repos/artifacts.js";
import { UsageRepo } from "../storage/repos/usage.js";
import { CreditsRepo } from "../storage/repos/credits.js";
import { LedgerRepo } from "../storage/repos/ledger.js";
import { AgentsRepo } from "../storage/repos/agents.js";
import type { RateLimiterAbstract } from "rate-limiter-flexible";
import type { ToolBridgePorts, ToolCatalog, UpstreamRegistry, VmDirectory } from "./tools/ports.js";
import { loadModels } from "./chat/models-config.js";
import { ModelRouter } from "./chat/model-router.js";
import { Allowance, loadPlans } from "./chat/allowance.js";
import { RevokedSessionsRepo } from "../storage/repos/revoked-sessions.js";
import { ToolPlansRepo } from "../storage/repos/tool-plans.js";
import { AgentStateRepo } from "../storage/repos/agent-state.js";
import { SecretBox } from "../storage/secret-box.js";
import type { EventLog } from "../storage/events/event-log.js";
import { LocalEventLog } from "../storage/events/local-event-log.js";
import { RedisEventLog } from "../storage/events/redis-event-log.js";
import { WebhooksRepo } from "../storage/repos/webhooks.js";
import { WebhookWorker } from "./webhooks/worker.js";
import { Metrics } from "./metrics.js";
import { DeploymentsRepo } from "../storage/repos/deployments.js";
import { ReleasesRepo } from "../storage/repos/releases.js";
import { ModelRegistryRepo } from "../storage/repos/model-registry.js";
import { ModelRegistry } from "./model-registry/registry.js";
import { openTelemetry } from "../storage/repos/telemetry.js";
import type { TelemetryStore } from "../storage/repos/telemetry-model.js";
import { emitEvent } from "./events/publish.js";

/** What handlers reach through `ctx.services`: storage, repositories, credentials, clients. */
export interface Services {
  readonly config: Config;
  readonly log: Logger;
  /** Prometheus metrics of this service (GET /metrics). */
  readonly metrics: Metrics;
  readonly store: Store;
  readonly users: UsersRepo;
  readonly keys: KeysRepo;
  readonly tenants: TenantsRepo;
  /** Tenant members and their roles (docs/tenants.md). */
  readonly members: MembersRepo;
  /** Workspace files (docs/tenants.md "Artifacts"). */
  readonly artifacts: ArtifactsRepo;
  /** The gateway's own metering, per tenant and day (docs/billing.md "Usage"). */
  readonly usage: UsageRepo;
  readonly credits: CreditsRepo;
  /** Holds and settlements on every account that limits spending (credits, key limits, plans, tenant tokens). */
  readonly ledger: LedgerRepo;
  /** Gateway agents (by id), their logs, and the index of tenants each user created. */
  readonly agents: AgentsRepo;
  /** The one tool catalog (built-ins, upstream MCP servers, VMs). */
  readonly catalog: ToolCatalog;
  /** Connected VM agents, here and (STORAGE=redis) on other instances. */
  readonly vms: VmDirectory;
  /** Registered upstream MCP servers, connected and feeding the catalog. */
  readonly upstream: UpstreamRegistry;
  /** The model router (the spec's "model gateway"): ids to providers, prices. */
  readonly models: ModelRouter;
  /** The Account API plans and each user's allowance in its window (chat; not tool plans). */
  readonly allowance: Allowance;
  /** Stored tool plans (POST /mcp/plan, /mcp/execute), per user. */
  readonly toolPlans: ToolPlansRepo;
  /** Agents' live state: lifecycle, running counts, status times, log sequence. */
  readonly agentState: AgentStateRepo;
  /** Component releases and their rollouts (docs/updates.md). */
  readonly releases: ReleasesRepo;
  /** Catalog metadata, statuses the router obeys, and health per model (docs/model-registry.md). */
  readonly modelRegistry: ModelRegistry;
  /** Telemetry events and their summaries, per tenant (docs/telemetry.md). */
  readonly telemetry: TelemetryStore;
  /** Encrypts secrets at rest (DATA_ENCRYPTION_SECRET). */
  readonly secrets: SecretBox;
  /** The event bus (docs/events.md): Redis Streams on Redis, in process on memory and fs. */
  readonly events: EventLog;
  /** Webhook subscriptions and deliveries (docs/webhooks.md). */
  readonly webhooks: WebhooksRepo;
  /** Sends due webhook deliveries; `tick()` runs one pass. */
  readonly webhookWorker: WebhookWorker;
  readonly sessions: SessionTokens;
  readonly keyPrefixes: KeyPrefixes;
  /** Failed sign-ins per email. */
  readonly loginLimiter: RateLimiterAbstract;
  /**
   * Name resolution for every outbound connection the address rule guards (OutboundGuard in
   * rpc/policies: upstream MCP servers, http_fetch, webhooks); tests inject one.
   */
  readonly resolveHost: ResolveHost;
  /** Registers cleanup to run on shutdown, last registered first. */
  onClose(fn: () => Promise<void> | void): void;
  close(): Promise<void>;
}

/** Opens the tool bridge over the service's storage; the composition root passes the real one. */
/** Publishes one of the service's own events under a tenant (rpc/events/publish.ts); never fails. */
export type EmitEvent = (tenantId: string | undefined, type: string, data: Record<string, unknown>) => void;

export type OpenToolBridge = (deps: { config: Config; log: Logger; store: Store; secrets: SecretBox; resolveHost: ResolveHost; emit: EmitEvent }) => Promise<ToolBridgePorts>;

export interface ServicesOptions {
  /** Name resolution for guarded outbound connections (default: the system resolver). */
  resolveHost?: ResolveHost;
  /** STORAGE=fs, DATA_DIR owned by a running server: fail (a server) or go through it (the admin command). */
  whenDataDirOwned?: "fail" | "connect";
}

/** A bridge with no tools, for callers that never touch the catalog (the admin command). */
export const noTools: OpenToolBridge = async () => ({
  catalog: {
    list: async () => [],
    get: async () => undefined,
    call: async (name) => {
      throw new Error(`No tool bridge in this process: ${name}`);
    },
    onChange: () => () => undefined,
  },
  vms: {
    admit: async () => {
      throw new Error("No tool bridge in this process");
    },
    list: async () => [],
    find: async () => undefined,
    call: async (vmId) => {
      throw new Error(`No tool bridge in this process: ${vmId}`);
    },
    ask: async (vmId) => {
      throw new Error(`No tool bridge in this process: ${vmId}`);
    },
    stats: () => ({ connected: 0, inFlight: 0 }),
  },
  upstream: {
    register: async () => {
      throw new Error("No tool bridge in this process");
    },
    remove: async () => undefined,
    list: async () => [],
    summary: () => ({ shared: [], tenants: { total: 0, healthy: 0, unhealthy: 0 } }),
    find: () => undefined,
    visible: () => [],
  },
  close: async () => undefined,
});

export async function createServices(config: Config, log: Logger, openTools: OpenToolBridge, options: ServicesOptions = {}): Promise<Services> {
  const resolveHost = options.resolveHost ?? systemResolver;
  // Validated before storage opens: a bad models or plans document stops the start (ConfigError).
  const models = new ModelRouter(loadModels(config), config, process.env);
  const planConfigs = loadPlans(config);
  // Process-wide, like the thread pool it protects.
  setHashConcurrency(config.PASSWORD_HASH_CONCURRENCY);
  const store = await openStore(config, { whenOwned: options.whenDataDirOwned ?? "fail" });
  const metrics = new Metrics();
  metrics.observeStorage(store.kv);
  let secret = config.GATEWAY_JWT_SECRET ?? (await store.persistentSecret("jwt-secret"));
  if (!secret) {
    if (config.STORAGE === "redis") {
      await store.close();
      throw new ConfigError(["GATEWAY_JWT_SECRET is required with STORAGE=redis: set the same secret (32+ characters) on every instance, so each verifies the others' tokens"]);
    }
    secret = randomBytes(32).toString("base64url");
  }
  let dataSecret = config.DATA_ENCRYPTION_SECRET ?? (await store.persistentSecret("data-encryption-secret"));
  if (!dataSecret) {
    if (config.STORAGE === "redis") {
      await store.close();
      throw new ConfigError(["DATA_ENCRYPTION_SECRET is required with STORAGE=redis: set the same secret (32+ characters) on every instance, so each reads the secrets the others stored"]);
    }
    // memory: nothing outlives the process, so a key of its own is enough.
    dataSecret = randomBytes(32).toString("base64url");
  }
  const secrets = new SecretBox(dataSecret);
  const closers: (() => Promise<void> | void)[] = [() => store.close()];
  let services: Services | undefined;
  let tools: ToolBridgePorts;
  try {
    // Events the bridge observes (a VM leaving, an upstream server's health) go on the bus
    // once the services exist; before that there is no tenant listening yet.
    const emit: EmitEvent = (tenantId, type, data) => {
      if (services) emitEvent(services, tenantId, type, data);
    };
    tools = await openTools({ config, log, store, secrets, resolveHost, emit });
  } catch (error) {
    await store.close();
    throw error;
  }
  closers.push(() => tools.close());
  const { catalog, vms, upstream } = tools;
  const modelRegistry = new ModelRegistry(new ModelRegistryRepo(store), models, store.bus, config);
  try {
    await modelRegistry.start();
  } catch (error) {
    for (const fn of closers.reverse()) await fn();
    throw error;
  }
  closers.push(() => modelRegistry.stop());
  // Deployment cooldowns and capacity, shared by every instance (docs/providers.md "Cooldown").
  closers.push(await models.share(new DeploymentsRepo(store), store.bus, metrics));
  const ledger = new LedgerRepo(store);
  const eventOptions = { maxDeliveries: config.EVENTS_MAX_DELIVERIES, retentionMs: config.EVENTS_RETENTION * 1000 };
  const events: EventLog =
    store.driver === "redis" && store.duplicateRedis
      ? new RedisEventLog(store.duplicateRedis(), config.REDIS_PREFIX, eventOptions)
      : new LocalEventLog(store.kv, { ...eventOptions, persist: store.driver === "fs" });
  closers.push(() => events.close());
  const webhooks = new WebhooksRepo(store);
  const webhookWorker = new WebhookWorker({
    config,
    log,
    repo: webhooks,
    secrets,
    resolveHost,
    // spec-free catalog entry (docs/events.md): a delivery out of attempts is itself an event,
    // except for deliveries of that event (no chain of failures about failures).
    async onFailed(delivery) {
      if (delivery.eventType === "webhook.delivery.failed" || !services) return;
      const last = delivery.attempts.at(-1);
      await services.events
        .publish({
          tenantId: delivery.tenantId,
          topic: "webhook",
          type: "webhook.delivery.failed",
          source: "gateway",
          payload: { deliveryId: delivery.id, subscriptionId: delivery.subscriptionId, eventId: delivery.eventId, attempts: delivery.attempts.length, lastStatusCode: last?.statusCode ?? null, lastError: last?.error ?? null },
        })
        .then((event) => webhookWorker.fanOut(event));
    },
  });
  closers.push(() => webhookWorker.close());
  countToolCalls(catalog, metrics);
  metrics.gauge("gateway_vm_sockets", "VM-agent sockets connected to this instance", () => vms.stats().connected);
  services = {
    config,
    log,
    metrics,
    store,
    users: new UsersRepo(store),
    keys: new KeysRepo(store),
    tenants: new TenantsRepo(store),
    members: new MembersRepo(store),
    artifacts: new ArtifactsRepo(store),
    usage: new UsageRepo(store),
    credits: new CreditsRepo(store),
    ledger,
    agents: new AgentsRepo(store),
    catalog,
    vms,
    upstream,
    models,
    allowance: new Allowance(planConfigs, ledger),
    toolPlans: new ToolPlansRepo(store, secrets),
    agentState: new AgentStateRepo(store),
    releases: new ReleasesRepo(store),
    modelRegistry,
    telemetry: openTelemetry(store, config.TELEMETRY_RETENTION_DAYS),
    secrets,
    events,
    webhooks,
    webhookWorker,
    sessions: new SessionTokens(secret, config.SESSION_TTL_SECONDS, new RevokedSessionsRepo(store.atomic)),
    keyPrefixes: keyPrefixes(config.PLATFORM_KEY_SERVICE, config.ACCOUNT_KEY_PREFIX),
    resolveHost,
    loginLimiter: store.limiter({ name: "login", points: config.LOGIN_MAX_FAILURES, durationSeconds: config.LOGIN_WINDOW_SECONDS }),
    onClose(fn) {
      closers.push(fn);
    },
    async close() {
      for (const fn of closers.reverse()) await fn();
    },
  };
  webhookWorker.start();
  return services;
}

/** Counts every catalog call by source and outcome, whichever transport or agent made it. */
function countToolCalls(catalog: ToolCatalog, metrics: Metrics): void {
  const call = catalog.call.bind(catalog);
  catalog.call = async (name, args, options) => {
    try {
      const result = await call(name, args, options);
      metrics.toolCall(name, result.isError ? "tool_error" : "ok");
      return result;
    } catch (error) {
      metrics.toolCall(name, "failed");
      throw error;
    }
  };
}
