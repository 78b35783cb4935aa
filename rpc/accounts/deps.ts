import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { LoginThrottle } from "./login-throttle.js";

/** What the accounts domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type AccountsDeps = Pick<Repos, "users" | "tenants" | "members" | "agents"> &
  Pick<Ports, "config" | "log" | "sessions" | "sink" | "store"> & {
    loginThrottle: LoginThrottle;
  };

export const accountsDomain = domain<AccountsDeps>("accounts");

/** The call context of a accounts handler or helper. */
export type AccountsContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, AccountsDeps>;
