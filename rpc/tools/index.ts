import { pick } from "../module.js";
import { toolsDomain } from "./deps.js";
import { vmToolMethods } from "./vm-methods.js";
import { toolMethods } from "./methods.js";
import { mcpServerMethods } from "./mcp-server-methods.js";
import { bridgeHealthMethods } from "./health-methods.js";
import { routingMethods } from "./routing-methods.js";
import { vmListMethods } from "./vm-list-methods.js";
import { sharedServerMethods } from "./shared-server-methods.js";
import { McpServersRepo } from "../../storage/repos/mcp-servers.js";

/** The tool catalog, upstream MCP servers, VM agents and tool routing, over the bridge's ports (rpc/tools/ports.ts). */
export const toolsModule = toolsDomain.module({
  methods: [
    ...vmToolMethods,
    ...toolMethods,
    ...mcpServerMethods,
    ...bridgeHealthMethods,
    ...routingMethods,
    ...vmListMethods,
    ...sharedServerMethods,
  ],
  init: (ports) => {
    const { catalog, vms, upstream } = ports.use("bridge");
    return {
      ...pick(ports, ["config", "log", "store", "sink", "onClose", "metrics"]),
      ...pick(ports.repos, ["users", "tenants", "members", "agents", "toolPlans"]),
      catalog,
      vms,
      upstream,
      mcpServers: new McpServersRepo(ports.store, ports.secrets),
      models: ports.use("models"),
    };
  },
});
