import { randomBytes } from "node:crypto";
import type { Config } from "./config.js";
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
import { loadPlans, Plans } from "./chat/allowance.js";
import { RevokedSessionsRepo } from "../storage/repos/revoked-sessions.js";
import { ToolPlansRepo } from "../storage/repos/tool-plans.js";
import { SecretBox } from "../storage/secret-box.js";

/** What handlers reach through `ctx.services`: storage, repositories, credentials, clients. */
export interface Services {
  readonly config: Config;
  readonly log: Logger;
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
  /** Account API plans and their per-user allowance counters. */
  readonly plans: Plans;
  /** Stored tool plans (POST /mcp/plan, /mcp/execute), per user. */
  readonly toolPlans: ToolPlansRepo;
  /** Encrypts secrets at rest (DATA_ENCRYPTION_SECRET). */
  readonly secrets: SecretBox;
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
export type OpenToolBridge = (deps: { config: Config; log: Logger; store: Store; secrets: SecretBox; resolveHost: ResolveHost }) => Promise<ToolBridgePorts>;

export interface ServicesOptions {
  /** Name resolution for guarded outbound connections (default: the system resolver). */
  resolveHost?: ResolveHost;
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
    stats: () => ({ connected: 0, inFlight: 0 }),
  },
  upstream: {
    register: async () => {
      throw new Error("No tool bridge in this process");
    },
    remove: async () => undefined,
    list: async () => [],
    summary: () => ({ shared: [], tenants: { total: 0, healthy: 0, unhealthy: 0 } }),
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
  const store = await openStore(config);
  let secret = config.GATEWAY_JWT_SECRET ?? (await store.persistentSecret("jwt-secret"));
  if (!secret) {
    if (config.STORAGE === "redis") {
      await store.close();
      throw new Error("GATEWAY_JWT_SECRET is required with STORAGE=redis: every instance must verify the same tokens");
    }
    secret = randomBytes(32).toString("base64url");
  }
  let dataSecret = config.DATA_ENCRYPTION_SECRET ?? (await store.persistentSecret("data-encryption-secret"));
  if (!dataSecret) {
    if (config.STORAGE === "redis") {
      await store.close();
      throw new Error("DATA_ENCRYPTION_SECRET is required with STORAGE=redis: every instance must read the secrets the others stored");
    }
    // memory: nothing outlives the process, so a key of its own is enough.
    dataSecret = randomBytes(32).toString("base64url");
  }
  const secrets = new SecretBox(dataSecret);
  const closers: (() => Promise<void> | void)[] = [() => store.close()];
  let tools: ToolBridgePorts;
  try {
    tools = await openTools({ config, log, store, secrets, resolveHost });
  } catch (error) {
    await store.close();
    throw error;
  }
  closers.push(() => tools.close());
  const { catalog, vms, upstream } = tools;
  const ledger = new LedgerRepo(store);
  return {
    config,
    log,
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
    plans: new Plans(planConfigs, ledger),
    toolPlans: new ToolPlansRepo(store, secrets),
    secrets,
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
}
