import { randomBytes } from "node:crypto";
import type { Config } from "./config.js";
import type { Logger } from "./log.js";
import { keyPrefixes, type KeyPrefixes } from "./credentials/api-keys.js";
import { SessionTokens } from "./credentials/sessions.js";
import { openStore, type Store } from "../storage/store.js";
import { UsersRepo } from "../storage/repos/users.js";
import { KeysRepo } from "../storage/repos/keys.js";
import { TenantsRepo } from "../storage/repos/tenants.js";
import { CreditsRepo } from "../storage/repos/credits.js";
import { AgentsRepo } from "../storage/repos/agents.js";
import type { RateLimiterAbstract } from "rate-limiter-flexible";
import { Catalog } from "../bridge/catalog.js";
import { VmHub } from "../bridge/vm/hub.js";
import { BuiltinSource } from "../bridge/builtin/source.js";
import { UpstreamServers } from "../bridge/upstream/registry.js";
import { loadModels } from "./models/catalog-config.js";
import { ModelRouter } from "./models/router.js";
import { loadPlans, Plans } from "./models/plans.js";
import { ToolPlansRepo } from "../storage/repos/plans.js";

/** What handlers reach through `ctx.services`: storage, repositories, credentials, clients. */
export interface Services {
  readonly config: Config;
  readonly log: Logger;
  readonly store: Store;
  readonly users: UsersRepo;
  readonly keys: KeysRepo;
  readonly tenants: TenantsRepo;
  readonly credits: CreditsRepo;
  /** Gateway agents (by id), their logs, and the index of tenants each user created. */
  readonly agents: AgentsRepo;
  /** The one tool catalog (built-ins, upstream MCP servers, VMs). */
  readonly catalog: Catalog;
  /** Connected VM agents, here and (STORAGE=redis) on other instances. */
  readonly vms: VmHub;
  /** Registered upstream MCP servers, connected and feeding the catalog. */
  readonly upstream: UpstreamServers;
  /** The model router (the spec's "model gateway"): ids to providers, prices. */
  readonly models: ModelRouter;
  /** Account API plans and their per-user allowance counters. */
  readonly plans: Plans;
  /** Stored tool plans (POST /mcp/plan, /mcp/execute), per user. */
  readonly toolPlans: ToolPlansRepo;
  readonly sessions: SessionTokens;
  readonly keyPrefixes: KeyPrefixes;
  /** Failed sign-ins per email. */
  readonly loginLimiter: RateLimiterAbstract;
  /** Registers cleanup to run on shutdown, last registered first. */
  onClose(fn: () => Promise<void> | void): void;
  close(): Promise<void>;
}

export async function createServices(config: Config, log: Logger): Promise<Services> {
  // Validated before storage opens: a bad models or plans document stops the start (ConfigError).
  const models = new ModelRouter(loadModels(config), config, process.env);
  const planConfigs = loadPlans(config);
  const store = await openStore(config);
  let secret = config.GATEWAY_JWT_SECRET ?? (await store.persistentSecret("jwt-secret"));
  if (!secret) {
    if (config.STORAGE === "redis") {
      await store.close();
      throw new Error("GATEWAY_JWT_SECRET is required with STORAGE=redis: every instance must verify the same tokens");
    }
    secret = randomBytes(32).toString("base64url");
  }
  const closers: (() => Promise<void> | void)[] = [() => store.close()];
  const catalog = new Catalog();
  const vms = new VmHub({ config, log, store, catalog });
  closers.push(() => vms.close());
  await vms.start();
  catalog.addSource(new BuiltinSource());
  const upstream = new UpstreamServers({ config, log, store, catalog });
  closers.push(() => upstream.close());
  await upstream.start();
  return {
    config,
    log,
    store,
    users: new UsersRepo(store),
    keys: new KeysRepo(store),
    tenants: new TenantsRepo(store),
    credits: new CreditsRepo(store),
    agents: new AgentsRepo(store),
    catalog,
    vms,
    upstream,
    models,
    plans: new Plans(planConfigs, store.atomic),
    toolPlans: new ToolPlansRepo(store),
    sessions: new SessionTokens(secret, config.SESSION_TTL_SECONDS, store.atomic),
    keyPrefixes: keyPrefixes(config.PLATFORM_KEY_SERVICE, config.ACCOUNT_KEY_PREFIX),
    loginLimiter: store.limiter({ name: "login", points: config.LOGIN_MAX_FAILURES, durationSeconds: config.LOGIN_WINDOW_SECONDS }),
    onClose(fn) {
      closers.push(fn);
    },
    async close() {
      for (const fn of closers.reverse()) await fn();
    },
  };
}
