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
import { UpstreamOAuthRepo } from "../../storage/repos/upstream-oauth.js";
import { upstreamOAuthMethods } from "./upstream-oauth-methods.js";
import { toGuardedFetch } from "../outbound/guarded-fetch.js";
import { OutboundGuard } from "../outbound/outbound-guard.js";

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
    ...upstreamOAuthMethods,
  ],
  init: (ports) => {
    const { catalog, vms, upstream } = ports.use("bridge");
    // The same address rule as the connections to upstream servers: their authorization servers are reached like them.
    const guard = new OutboundGuard({
      allowPrivate: ports.config.MCP_SERVERS_ALLOW_PRIVATE,
      resolve: ports.resolveHost,
      hint: "this deployment does not connect to MCP servers on private addresses",
    });
    ports.onClose(() => guard.close());
    return {
      ...pick(ports, ["config", "log", "store", "sink", "onClose", "metrics"]),
      ...pick(ports.repos, ["users", "tenants", "members", "agents", "toolPlans", "audit"]),
      catalog,
      vms,
      upstream,
      mcpServers: new McpServersRepo(ports.store, ports.secrets),
      upstreamOAuth: new UpstreamOAuthRepo(ports.store, ports.secrets),
      oauthFetch: toGuardedFetch(guard),
      models: ports.use("models"),
    };
  },
});
