import type { AnyMethod } from "./define.js";
import type { Config } from "./config.js";
import { authMethods } from "./accounts/methods.js";
import { gatewayKeyMethods } from "./keys/gateway-keys.js";
import { consoleSessionMethods } from "./accounts/console-session.js";
import { consoleKeyMethods } from "./keys/console-keys.js";
import { accountKeyMethods } from "./keys/account-keys.js";
import { vmToolMethods } from "./tools/vm-methods.js";
import { toolMethods } from "./tools/methods.js";
import { mcpServerMethods } from "./tools/mcp-server-methods.js";
import { bridgeHealthMethods } from "./tools/health-methods.js";
import { chatMethods } from "./chat/methods.js";
import { modelMethods } from "./chat/model-methods.js";
import { routingMethods } from "./tools/routing-methods.js";
import { orchestratorAgentMethods } from "./agents/orchestrator-methods.js";
import { agentStreamMethods, localAgentMethods } from "./agents/methods.js";
import { accountAgentMethods } from "./agents/account-methods.js";
import { tenantMethods } from "./tenants/methods.js";
import { eventMethods } from "./events/methods.js";
import { webhookMethods } from "./webhooks/methods.js";
import { updateMethods } from "./updates/methods.js";
import { modelRegistryMethods } from "./model-registry/methods.js";
import { telemetryMethods } from "./telemetry/methods.js";
import { memberMethods } from "./tenants/member-methods.js";
import { workspaceMethods } from "./workspaces/methods.js";
import { artifactMethods } from "./workspaces/artifact-methods.js";
import { billingProxyMethods } from "./billing/proxy.js";
import { usageMethods } from "./billing/usage-methods.js";
import { creditMethods } from "./billing/credit-methods.js";
import { vmListMethods } from "./tools/vm-list-methods.js";

/** Every operation the service offers in any mode. Adding one means adding its declaration to a domain list. */
export const allMethods: readonly AnyMethod[] = [
  ...authMethods,
  ...gatewayKeyMethods,
  ...consoleSessionMethods,
  ...consoleKeyMethods,
  ...accountKeyMethods,
  ...vmToolMethods,
  ...toolMethods,
  ...mcpServerMethods,
  ...bridgeHealthMethods,
  ...modelMethods,
  ...chatMethods,
  ...routingMethods,
  ...tenantMethods,
  ...eventMethods,
  ...webhookMethods,
  ...updateMethods,
  ...modelRegistryMethods,
  ...telemetryMethods,
  ...memberMethods,
  ...workspaceMethods,
  ...artifactMethods,
  ...usageMethods,
  ...creditMethods,
  ...vmListMethods,
  ...billingProxyMethods,
  ...agentStreamMethods,
];

/**
 * The methods a deployment serves. Agents come in two modes (spec 4.4): by id, run here
 * (default), or by name, proxied to the orchestrator when `ORCH_BASE_URL` is set.
 */
export function methodsFor(config: Pick<Config, "ORCH_BASE_URL">): readonly AnyMethod[] {
  // The Account API's `/agent/*` (docs/agents.md) serves the agents run here.
  const agentMethods: readonly AnyMethod[] = config.ORCH_BASE_URL ? orchestratorAgentMethods : [...localAgentMethods, ...accountAgentMethods];
  return [...allMethods, ...agentMethods];
}
