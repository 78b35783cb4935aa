import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";

/** What the updates domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type UpdatesDeps = Pick<Repos, "releases"> & Pick<Ports, "config">;

export const updatesDomain = domain<UpdatesDeps>("updates");

/** The call context of a updates handler or helper. */
export type UpdatesContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, UpdatesDeps>;
