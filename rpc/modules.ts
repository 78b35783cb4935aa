import type { Config } from "./config.js";
import type { MethodsOf } from "./module.js";
import { moneyModule } from "./money/index.js";
import { accountsModule } from "./accounts/index.js";
import { tenantsModule } from "./tenants/index.js";
import { workspacesModule } from "./workspaces/index.js";
import { keysModule } from "./keys/index.js";
import { eventsModule } from "./events/index.js";
import { webhooksModule } from "./webhooks/index.js";
import { chatModule } from "./chat/index.js";
import { modelRegistryModule } from "./model-registry/index.js";
import { toolsModule } from "./tools/index.js";
import { oauthModule } from "./oauth/index.js";
import { localAgentsModule, orchestratorAgentsModule } from "./agents/index.js";
import { billingModule } from "./billing/index.js";
import { telemetryModule } from "./telemetry/index.js";
import { updatesModule } from "./updates/index.js";

/**
 * The domain modules of a deployment, lowest first (docs/architecture.md "Domain modules"): a
 * module is initialised after, and may use the exported ports of, those above it in this list,
 * and it imports only those (`.dependency-cruiser.cjs` holds the same order as data). Agents
 * come in two modes (docs/interface.md 4.4): by id, run here (default), or by name, proxied to the
 * orchestrator when `ORCH_BASE_URL` is set.
 */
export function modulesFor(config: Pick<Config, "ORCH_BASE_URL">) {
  return [
    moneyModule,
    accountsModule,
    tenantsModule,
    workspacesModule,
    keysModule,
    eventsModule,
    webhooksModule,
    chatModule,
    modelRegistryModule,
    toolsModule,
    oauthModule,
    config.ORCH_BASE_URL ? orchestratorAgentsModule : localAgentsModule,
    billingModule,
    telemetryModule,
    updatesModule,
  ];
}

/**
 * Every method a deployment may serve, with its types (both agent modes): the registry's type
 * (`Registry<ServiceMethod>`), so the service's dispatcher calls only these.
 */
export type ServiceMethod = MethodsOf<ReturnType<typeof modulesFor>[number]>;

/** Every method of a deployment, in module order (the registry, OpenAPI, the metrics' operation labels). */
export function methodsFor(config: Pick<Config, "ORCH_BASE_URL">): readonly ServiceMethod[] {
  return modulesFor(config).flatMap((module): readonly ServiceMethod[] => module.methods);
}
