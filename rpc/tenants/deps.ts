import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { Money } from "../money/money.js";

/** What the tenants domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type TenantsDeps = Pick<Repos, "users" | "tenants" | "members" | "agents" | "audit"> &
  Pick<Ports, "config" | "sink"> & {
    money: Money;
  };

export const tenantsDomain = domain<TenantsDeps>("tenants");

/** The call context of a tenants handler or helper. */
export type TenantsContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, TenantsDeps>;
