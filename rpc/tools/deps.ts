import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { ToolCatalog, UpstreamRegistry, VmDirectory } from "./ports.js";
import type { ModelRouter } from "../chat/model-router.js";
import type { McpServersRepo } from "../../storage/repos/mcp-servers.js";

/** What the tools domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type ToolsDeps = Pick<Repos, "users" | "tenants" | "members" | "agents" | "toolPlans"> &
  Pick<Ports, "config" | "log" | "store" | "sink" | "onClose" | "metrics"> & {
    catalog: ToolCatalog;
    vms: VmDirectory;
    upstream: UpstreamRegistry;
    /** The stored registrations: the servers operators share are written here, and every instance's bridge follows. */
    mcpServers: McpServersRepo;
    models: ModelRouter;
  };

export const toolsDomain = domain<ToolsDeps>("tools");

/** The call context of a tools handler or helper. */
export type ToolsContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, ToolsDeps>;
