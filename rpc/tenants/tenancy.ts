import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import type { Services } from "../services.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { monthKey } from "../agents/time.js";
import { requireTenantAccess, tenantOrPersonal, type Role } from "./access.js";
import type { Charge } from "../chat/charge.js";


/**
 * The tenant an agent is created in: the named one when the caller is a member with at least
 * `need` (rpc/tenants/access.ts), or the caller's personal tenant — made on first use with
 * TENANT_DEFAULT_AGENT_LIMIT and TENANT_DEFAULT_TOKENS_PER_MONTH when it does not exist yet.
 */
export function tenantFor(services: Services, principal: Principal, tenantId?: string, need: Role = "member"): Promise<Tenant> {
  return tenantOrPersonal(services, principal, tenantId, need);
}

/** A tenant the caller reaches with at least `need`; a non-member and a missing tenant are the same 404. */
export function ownedTenant(services: Services, principal: Principal, tenantId: string, need: Role = "viewer"): Promise<Tenant> {
  return requireTenantAccess(services, principal, tenantId, need);
}

/**
 * Creates an agent in the tenant unless that would pass `limits.agents` (403,
 * docs/agents.md "Limits"). The count is the tenant's agent records, read and extended under
 * the tenant's lock, so two concurrent creates can never both take the last place, and a
 * process killed at any point leaves the count equal to the agents (docs/crash-consistency.md).
 */
export function createInTenant<T>(services: Services, tenant: Tenant, create: () => Promise<T>): Promise<T> {
  return services.agents.withTenantLock(tenant.id, async () => {
    const agents = await services.agents.countInTenant(tenant.ownerId, tenant.id);
    if (agents >= tenant.limits.agents) {
      throw new ServiceError("FORBIDDEN", `Agent limit reached: tenant ${tenant.slug} may have ${tenant.limits.agents} agent(s); delete one or raise limits.agents`, {
        details: { tenantId: tenant.id, limit: tenant.limits.agents, agents },
      });
    }
    return create();
  });
}

export function agentCount(services: Services, tenant: Tenant): Promise<number> {
  return services.agents.countInTenant(tenant.ownerId, tenant.id);
}

/** Tokens the tenant's invocations used this calendar month (UTC), settled requests only. */
export async function tokensUsed(services: Services, tenantId: string, now = new Date()): Promise<number> {
  return (await services.ledger.state(services.ledger.tenantTokens(tenantId, monthKey(now)))).value;
}

/**
 * The tenant's month as a charge of one model turn that may use up to `tokens` (prompt plus
 * output cap): admitted while something of `limits.tokensPerMonth` remains, less what turns in
 * flight hold (storage/admission.ts), else 429 (docs/agents.md "Limits").
 */
export function tenantTokensCharge(services: Services, tenant: Tenant, tokens: number, now = new Date()): Charge {
  const limit = tenant.limits.tokensPerMonth;
  return {
    account: services.ledger.tenantTokens(tenant.id, monthKey(now)),
    amount: tokens,
    limit,
    refuse: ({ value: used, held }, requested) => {
      const nextMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
      return new ServiceError(
        "QUOTA_EXCEEDED",
        `Token allowance spent: tenant ${tenant.slug} used ${used} of ${limit} tokens this month` +
          (used < limit ? ` and the rest is held by model turns in flight (${held} tokens)` : ""),
        {
          details: { tenantId: tenant.id, used, held, requested, limit, resetsAt: nextMonth.toISOString() },
          headers: { "Retry-After": String(Math.max(1, Math.ceil((nextMonth.getTime() - now.getTime()) / 1000))) },
          type: "insufficient_quota",
        },
      );
    },
    used: (usage) => usage.total_tokens,
  };
}
