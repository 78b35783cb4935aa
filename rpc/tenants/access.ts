import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import type { Services } from "../services.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { ROLES, type Role } from "../../storage/repos/members.js";
import type { User } from "../../storage/repos/users.js";
import { nowIso } from "../../storage/ids.js";
import { personalTenant } from "../accounts/accounts.js";

export { ROLES, type Role };

/**
 * The role each kind of operation on a tenant's resources needs (docs/tenants.md "Roles"):
 * viewers read, members use and create, admins manage members and settings, owners also
 * delete the tenant's resources and transfer ownership.
 */
export const TENANT_ACCESS = {
  read: "viewer",
  use: "member",
  create: "member",
  /** POST /events */
  publish: "member",
  manage: "admin",
  /** /webhooks/* */
  webhooks: "admin",
  delete: "owner",
} as const satisfies Record<string, Role>;

export type TenantAccess = keyof typeof TENANT_ACCESS;

const rank = (role: Role) => ROLES.indexOf(role);

/** True when `role` may do what `need` requires. */
export function roleAllows(role: Role, need: Role): boolean {
  return rank(role) >= rank(need);
}

const notFound = (tenantId: string) => new ServiceError("NOT_FOUND", `Tenant not found: ${tenantId}`);

/** The caller's personal tenant, made on first use (TENANT_DEFAULT_* limits) when it does not exist yet. */
async function personalOf(services: Services, user: User): Promise<Tenant> {
  const existing = await services.tenants.getTenant(user.tenantId);
  if (existing) return existing;
  return services.tenants.putTenant(personalTenant(services, user, `personal-${user.tenantId.slice(-8).toLowerCase()}`, nowIso()));
}

/**
 * A user's role in a tenant, or null for a non-member: their membership record; for a tenant
 * whose members were never changed (made before roles, or never shared), its creator is its owner.
 */
export async function roleIn(services: Services, userId: string, tenant: Tenant): Promise<Role | null> {
  const membership = await services.members.get(tenant.id, userId);
  if (membership) return membership.role;
  if (tenant.ownerId === userId && !(await services.members.seeded(tenant.id))) return "owner";
  return null;
}

/**
 * The one membership check (DESIGN "Ownership"): the tenant when the caller is a member with
 * at least `need` (default: read access), else the same 404 as a missing tenant for a
 * non-member, and 403 naming the role needed for a member whose role is too weak. MCP
 * sessions and agent-stream messages re-run their methods through the dispatcher, so a
 * removed member loses access on their next message.
 */
export async function requireTenantAccess(services: Services, principal: Principal, tenantId: string, need: Role = "viewer"): Promise<Tenant> {
  const user = await services.users.get(principal.userId);
  if (!user) throw notFound(tenantId);
  const tenant = user.tenantId === tenantId ? await personalOf(services, user) : await services.tenants.getTenant(tenantId);
  if (!tenant) throw notFound(tenantId);
  const role = await roleIn(services, user.id, tenant);
  if (!role) throw notFound(tenantId);
  if (!roleAllows(role, need)) {
    throw new ServiceError("FORBIDDEN", `Your role in tenant ${tenant.slug} is ${role}; this needs ${need} or above`, {
      details: { tenantId: tenant.id, role, required: need },
    });
  }
  return tenant;
}

/** `requireTenantAccess` for a kind of operation: `tenantAccess(services, principal, id, "publish")`. */
export function tenantAccess(services: Services, principal: Principal, tenantId: string, access: TenantAccess): Promise<Tenant> {
  return requireTenantAccess(services, principal, tenantId, TENANT_ACCESS[access]);
}

/** The named tenant (checked), or the caller's personal tenant when none is named. */
export async function tenantOrPersonal(services: Services, principal: Principal, tenantId: string | undefined, need: Role = "viewer"): Promise<Tenant> {
  if (tenantId) return requireTenantAccess(services, principal, tenantId, need);
  const user = await services.users.get(principal.userId);
  if (!user) throw new ServiceError("UNAUTHORIZED", "Invalid or expired API key");
  return requireTenantAccess(services, principal, user.tenantId, need);
}

/** True when the user is a member of the tenant with at least `need` (a quiet check for filters). */
export async function reaches(services: Services, userId: string, tenantId: string, need: Role = "viewer"): Promise<boolean> {
  const user = await services.users.get(userId);
  if (!user) return false;
  // A personal tenant keeps its user as owner (docs/tenants.md), made or not yet.
  if (user.tenantId === tenantId) return true;
  const tenant = await services.tenants.getTenant(tenantId);
  if (!tenant) return false;
  const role = await roleIn(services, userId, tenant);
  return role !== null && roleAllows(role, need);
}

/**
 * Every tenant the user is a member of, with their role: the personal one first, then the
 * others oldest first.
 */
export async function tenantsOf(services: Services, principal: Principal): Promise<{ tenant: Tenant; role: Role }[]> {
  const user = await services.users.get(principal.userId);
  if (!user) return [];
  const personal = await personalOf(services, user);
  // Tenants created before roles are indexed under their creator only.
  const ids = new Set([...(await services.members.tenantIdsOf(user.id)), ...(await services.agents.ownedTenantIds(user.id))]);
  ids.delete(personal.id);
  const out: { tenant: Tenant; role: Role }[] = [];
  const personalRole = await roleIn(services, user.id, personal);
  if (personalRole) out.push({ tenant: personal, role: personalRole });
  const others: { tenant: Tenant; role: Role }[] = [];
  for (const id of ids) {
    const tenant = await services.tenants.getTenant(id);
    if (!tenant) continue;
    const role = await roleIn(services, user.id, tenant);
    if (role) others.push({ tenant, role });
  }
  others.sort((a, b) => a.tenant.createdAt.localeCompare(b.tenant.createdAt));
  return [...out, ...others];
}
