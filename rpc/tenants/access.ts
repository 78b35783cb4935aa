import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import type { Services } from "../services.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { ownedTenant, tenantFor } from "./tenancy.js";

/**
 * The one membership check (DESIGN "Ownership"): the tenant when the caller may reach it,
 * else the same 404 as a missing tenant, so ids cannot be probed. For now a member is the
 * owner or the user whose personal tenant it is; roles are added here.
 */
export async function requireTenantAccess(services: Services, principal: Principal, tenantId: string): Promise<Tenant> {
  const user = await services.users.get(principal.userId);
  if (!user) throw new ServiceError("NOT_FOUND", `Tenant not found: ${tenantId}`);
  if (user.tenantId === tenantId) return tenantFor(services, principal);
  return ownedTenant(services, principal, tenantId);
}

/** The named tenant (checked), or the caller's personal tenant when none is named. */
export function tenantOrPersonal(services: Services, principal: Principal, tenantId: string | undefined): Promise<Tenant> {
  return tenantId ? requireTenantAccess(services, principal, tenantId) : tenantFor(services, principal);
}
