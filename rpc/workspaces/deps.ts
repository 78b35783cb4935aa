import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";

/** What the workspaces domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type WorkspacesDeps = Pick<Repos, "users" | "tenants" | "members" | "agents" | "artifacts" | "credits" | "keys"> &
  Pick<Ports, "config" | "log" | "sink">;

export const workspacesDomain = domain<WorkspacesDeps>("workspaces");

/** The call context of a workspaces handler or helper. */
export type WorkspacesContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, WorkspacesDeps>;
