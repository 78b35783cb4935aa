import type { AnyMethod } from "../define.js";
import type { Config } from "../config.js";
import { authMethods } from "./auth.js";
import { gatewayKeyMethods } from "./gateway-keys.js";
import { consoleSessionMethods } from "./console-session.js";
import { consoleKeyMethods } from "./console-keys.js";
import { accountKeyMethods } from "./account-keys.js";
import { vmToolMethods } from "./vm-tools.js";
import { toolMethods } from "./tools.js";
import { mcpServerMethods } from "./mcp-servers.js";
import { bridgeHealthMethods } from "./bridge-health.js";
import { chatMethods } from "./chat.js";
import { modelMethods } from "./models.js";
import { routingMethods } from "./routing.js";
import { orchestratorAgentMethods } from "./agents-orchestrator.js";
import { localAgentMethods } from "./agents.js";
import { tenantMethods } from "./tenants.js";

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
];

/**
 * The methods a deployment serves. Agents come in two modes (spec 4.4): by id, run here
 * (default), or by name, proxied to the orchestrator when `ORCH_BASE_URL` is set.
 */
export function methodsFor(config: Pick<Config, "ORCH_BASE_URL">): readonly AnyMethod[] {
  const agentMethods: readonly AnyMethod[] = config.ORCH_BASE_URL ? orchestratorAgentMethods : localAgentMethods;
  return [...allMethods, ...agentMethods];
}
