import { ServiceError } from "../errors.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import type { Repos } from "../repos.js";

/**
 * Creates an agent in the tenant unless that would pass `limits.agents` (403,
 * docs/agents.md "Limits"). The count is the tenant's agent records, read and extended under
 * the tenant's lock, so two concurrent creates can never both take the last place, and a
 * process killed at any point leaves the count equal to the agents (docs/crash-consistency.md).
 */
export function createInTenant<T>(deps: Pick<Repos, "agents">, tenant: Tenant, create: () => Promise<T>): Promise<T> {
  return deps.agents.withTenantLock(tenant.id, async () => {
    const agents = await deps.agents.countInTenant(tenant.ownerId, tenant.id);
    if (agents >= tenant.limits.agents) {
      throw new ServiceError(
        "FORBIDDEN",
        `Agent limit reached: tenant ${tenant.slug} may have ${tenant.limits.agents} agent(s); delete one or raise limits.agents`,
        {
          details: { tenantId: tenant.id, limit: tenant.limits.agents, agents },
        },
      );
    }
    return create();
  });
}

export function agentCount(deps: Pick<Repos, "agents">, tenant: Tenant): Promise<number> {
  return deps.agents.countInTenant(tenant.ownerId, tenant.id);
}
