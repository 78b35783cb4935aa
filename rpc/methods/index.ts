import type { AnyMethod } from "../define.js";
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

/** Every operation of the service. Adding one means adding its declaration to a domain list. */
export const allMethods: readonly AnyMethod[] = [...authMethods, ...gatewayKeyMethods, ...consoleSessionMethods, ...consoleKeyMethods, ...accountKeyMethods, ...vmToolMethods, ...toolMethods, ...mcpServerMethods, ...bridgeHealthMethods, ...modelMethods, ...chatMethods];
