import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { Money } from "../money/money.js";

/** What the billing domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type BillingDeps = Pick<Repos, "users" | "tenants" | "members" | "agents" | "credits" | "usage" | "audit"> &
  Pick<Ports, "config" | "log"> & {
    money: Money;
  };

export const billingDomain = domain<BillingDeps>("billing");

/** The call context of a billing handler or helper. */
export type BillingContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, BillingDeps>;
