import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";

/** What the keys domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type KeysDeps = Pick<Repos, "users" | "tenants" | "members" | "agents" | "keys" | "quotas" | "audit"> &
  Pick<Ports, "config" | "keyPrefixes" | "sink">;

export const keysDomain = domain<KeysDeps>("keys");

/** The call context of a keys handler or helper. */
export type KeysContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, KeysDeps>;
