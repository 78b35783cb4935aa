import type { Store } from "../storage/store.js";
import { UsersRepo } from "../storage/repos/users.js";
import { KeysRepo } from "../storage/repos/keys.js";
import { TenantsRepo } from "../storage/repos/tenants.js";
import { MembersRepo } from "../storage/repos/members.js";
import { ArtifactsRepo } from "../storage/repos/artifacts.js";
import { UsageRepo } from "../storage/repos/usage.js";
import { CreditsRepo } from "../storage/repos/credits.js";
import { LedgerRepo } from "../storage/repos/ledger.js";
import { AgentsRepo } from "../storage/repos/agents.js";
import { ToolPlansRepo } from "../storage/repos/tool-plans.js";
import { AgentStateRepo } from "../storage/repos/agent-state.js";
import { ReleasesRepo } from "../storage/repos/releases.js";
import { WebhooksRepo } from "../storage/repos/webhooks.js";
import { ModelRegistryRepo } from "../storage/repos/model-registry.js";
import { DeploymentsRepo } from "../storage/repos/deployments.js";
import { QuotasRepo } from "../storage/repos/quotas.js";
import { AuditRepo } from "../storage/repos/audit.js";
import { openTelemetry } from "../storage/repos/telemetry.js";
import type { TelemetryStore } from "../storage/repos/telemetry-model.js";
import type { SecretBox } from "../storage/secret-box.js";

/** The storage repositories (storage/repos/), one instance each per store: several hold caches fed by the bus. */
export interface Repos {
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
  /** Holds and settlements on every account that limits spending (rpc/money). */
  readonly ledger: LedgerRepo;
  /** Gateway agents (by id), their logs, and the index of tenants each user created. */
  readonly agents: AgentsRepo;
  /** Stored tool plans (POST /mcp/plan, /mcp/execute), per user. */
  readonly toolPlans: ToolPlansRepo;
  /** Agents' live state: lifecycle, running counts, status times, log sequence. */
  readonly agentState: AgentStateRepo;
  /** Component releases and their rollouts (docs/updates.md). */
  readonly releases: ReleasesRepo;
  /** Webhook subscriptions and deliveries (docs/webhooks.md). */
  readonly webhooks: WebhooksRepo;
  /** Catalog metadata, statuses and health per model (docs/model-registry.md). */
  readonly modelRegistry: ModelRegistryRepo;
  /** Failure counts, cooldowns and capacity of model deployments, shared by every instance (docs/providers.md). */
  readonly deployments: DeploymentsRepo;
  /** Telemetry events and their summaries, per tenant (docs/telemetry.md). */
  readonly telemetry: TelemetryStore;
  /** The locks and leased places of the quotas (docs/quotas.md). */
  readonly quotas: QuotasRepo;
  /** Who changed what, per tenant (docs/audit.md). */
  readonly audit: AuditRepo;
}

/** Repositories over `store`, each built the first time a module names it. */
export function openRepos(store: Store, secrets: SecretBox, options: { telemetryRetentionDays: number }): Repos {
  const build: { [K in keyof Repos]: () => Repos[K] } = {
    users: () => new UsersRepo(store),
    keys: () => new KeysRepo(store),
    tenants: () => new TenantsRepo(store),
    members: () => new MembersRepo(store),
    artifacts: () => new ArtifactsRepo(store),
    usage: () => new UsageRepo(store),
    credits: () => new CreditsRepo(store),
    ledger: () => new LedgerRepo(store),
    agents: () => new AgentsRepo(store),
    toolPlans: () => new ToolPlansRepo(store, secrets),
    agentState: () => new AgentStateRepo(store),
    releases: () => new ReleasesRepo(store),
    webhooks: () => new WebhooksRepo(store),
    modelRegistry: () => new ModelRegistryRepo(store),
    deployments: () => new DeploymentsRepo(store),
    telemetry: () => openTelemetry(store, options.telemetryRetentionDays),
    quotas: () => new QuotasRepo(store),
    audit: () => new AuditRepo(store),
  };
  const built: Partial<Record<keyof Repos, unknown>> = {};
  const repos = {} as Repos;
  for (const name of Object.keys(build) as (keyof Repos)[]) {
    Object.defineProperty(repos, name, {
      enumerable: true,
      get: () => (built[name] ??= build[name]()),
    });
  }
  return repos;
}
