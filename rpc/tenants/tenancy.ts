import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import type { Services } from "../services.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { nowIso } from "../../storage/ids.js";
import { monthKey } from "../agents/time.js";
import { personalTenant } from "../accounts/accounts.js";
import type { Charge } from "../chat/holds.js";

const slotsKey = (tenantId: string) => `tenant-agent-slots:${tenantId}`;

/**
 * The tenant an agent is created in: the named one when the caller owns it (else the same
 * 404 as a missing one), or the caller's personal tenant — made on first use with
 * TENANT_DEFAULT_AGENT_LIMIT and TENANT_DEFAULT_TOKENS_PER_MONTH when it does not exist yet.
 */
export async function tenantFor(services: Services, principal: Principal, tenantId?: string): Promise<Tenant> {
  if (tenantId) return ownedTenant(services, principal, tenantId);
  const user = await services.users.get(principal.userId);
  if (!user) throw new ServiceError("UNAUTHORIZED", "Invalid or expired API key");
  const existing = await services.tenants.getTenant(user.tenantId);
  if (existing) return existing;
  return services.tenants.putTenant(personalTenant(services, user, `personal-${user.tenantId.slice(-8).toLowerCase()}`, nowIso()));
}

/** A tenant the caller owns; another user's tenant and a missing one are the same 404. */
export async function ownedTenant(services: Services, principal: Principal, tenantId: string): Promise<Tenant> {
  const tenant = await services.tenants.getTenant(tenantId);
  if (!tenant || tenant.ownerId !== principal.userId) throw new ServiceError("NOT_FOUND", `Tenant not found: ${tenantId}`);
  return tenant;
}

/**
 * Takes one of the tenant's `limits.agents` slots, atomically: the slot counter runs
 * downwards from 0 and a debit that would pass `-limit` is refused, so two concurrent
 * creates can never both take the last slot (403, docs/agents.md "Limits").
 */
export async function takeAgentSlot(services: Services, tenant: Tenant): Promise<void> {
  const { ok, balance } = await services.store.atomic.debit(slotsKey(tenant.id), 1, -tenant.limits.agents);
  if (!ok) {
    throw new ServiceError("FORBIDDEN", `Agent limit reached: tenant ${tenant.slug} may have ${tenant.limits.agents} agent(s); delete one or raise limits.agents`, {
      details: { tenantId: tenant.id, limit: tenant.limits.agents, agents: -balance },
    });
  }
}

export async function releaseAgentSlot(services: Services, tenantId: string): Promise<void> {
  await services.store.atomic.adjust(slotsKey(tenantId), 1);
}

export async function agentCount(services: Services, tenantId: string): Promise<number> {
  return Math.max(0, -(await services.store.atomic.balance(slotsKey(tenantId))));
}

/** Tokens the tenant's invocations used this calendar month (UTC), settled requests only. */
export async function tokensUsed(services: Services, tenantId: string, now = new Date()): Promise<number> {
  return (await services.ledger.state(services.ledger.tenantTokens(tenantId, monthKey(now)))).value;
}

/**
 * The tenant's month as a charge of one model turn that may use up to `tokens` (prompt plus
 * output cap): the hold is refused with 429 once what is left of `limits.tokensPerMonth`,
 * less what turns in flight hold, cannot cover it (docs/agents.md "Limits").
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
          (used < limit ? ` and the rest cannot cover this model turn (up to ${requested} tokens${held ? `, ${held} held by turns in flight` : ""})` : ""),
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
