import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { ToolCatalog, UpstreamRegistry, VmDirectory } from "./ports.js";
import type { ModelRouter } from "../chat/model-router.js";
import type { McpServersRepo } from "../../storage/repos/mcp-servers.js";
import type { UpstreamOAuthRepo } from "../../storage/repos/upstream-oauth.js";
import type { GuardedFetch } from "../outbound/guarded-fetch.js";

/** What the tools domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type ToolsDeps = Pick<Repos, "users" | "tenants" | "members" | "agents" | "toolPlans" | "audit"> &
  Pick<Ports, "config" | "log" | "store" | "sink" | "onClose" | "metrics"> & {
    catalog: ToolCatalog;
    vms: VmDirectory;
    upstream: UpstreamRegistry;
    /** The stored registrations: the servers operators share are written here, and every instance's bridge follows. */
    mcpServers: McpServersRepo;
    /** The gateway's authorizations at upstream servers that need OAuth, and the flows in progress. */
    upstreamOAuth: UpstreamOAuthRepo;
    /** The gateway's requests as an OAuth client of upstream servers, under the private-address rule (MCP_SERVERS_ALLOW_PRIVATE). */
    oauthFetch: GuardedFetch;
    models: ModelRouter;
  };

export const toolsDomain = domain<ToolsDeps>("tools");

/** The call context of a tools handler or helper. */
export type ToolsContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, ToolsDeps>;
