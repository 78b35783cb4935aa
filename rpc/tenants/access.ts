import { annotateActive } from "../tracing.js";
import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { ROLES, type Role } from "../../storage/repos/members.js";
import type { User } from "../../storage/repos/users.js";
import { nowIso } from "../../storage/ids.js";
import { personalTenant } from "../accounts/accounts.js";
import type { Repos } from "../repos.js";
import type { Config } from "../config.js";

/** What tenant access reads (and the personal tenant it makes on first use). */
export type AccessDeps = Pick<Repos, "users" | "tenants" | "members" | "agents"> & {
  config: Pick<Config, "TENANT_DEFAULT_AGENT_LIMIT" | "TENANT_DEFAULT_TOKENS_PER_MONTH">;
};

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
async function personalOf(deps: AccessDeps, user: User): Promise<Tenant> {
  const existing = await deps.tenants.getTenant(user.tenantId);
  if (existing) return existing;
  return deps.tenants.putTenant(personalTenant(deps, user, `personal-${user.tenantId.slice(-8).toLowerCase()}`, nowIso()));
}

/**
 * A user's role in a tenant, or null for a non-member: their membership record; for a tenant
 * whose members were never changed (made before roles, or never shared), its creator is its owner.
 */
export async function roleIn(deps: AccessDeps, userId: string, tenant: Tenant): Promise<Role | null> {
  const membership = await deps.members.get(tenant.id, userId);
  if (membership) return membership.role;
  if (tenant.ownerId === userId && !(await deps.members.seeded(tenant.id))) return "owner";
  return null;
}

/**
 * The one membership check (docs/architecture.md "Ownership"): the tenant when the caller is a member with
 * at least `need` (default: read access), else the same 404 as a missing tenant for a
 * non-member, and 403 naming the role needed for a member whose role is too weak. MCP
 * sessions and agent-stream messages re-run their methods through the dispatcher, so a
 * removed member loses access on their next message.
 */
export async function requireTenantAccess(
  deps: AccessDeps,
  principal: Principal,
  tenantId: string,
  need: Role = "viewer",
): Promise<Tenant> {
  const user = await deps.users.get(principal.userId);
  if (!user) throw notFound(tenantId);
  const tenant = user.tenantId === tenantId ? await personalOf(deps, user) : await deps.tenants.getTenant(tenantId);
  if (!tenant) throw notFound(tenantId);
  const role = await roleIn(deps, user.id, tenant);
  if (!role) throw notFound(tenantId);
  if (!roleAllows(role, need)) {
    throw new ServiceError("FORBIDDEN", `Your role in tenant ${tenant.slug} is ${role}; this needs ${need} or above`, {
      details: { tenantId: tenant.id, role, required: need },
    });
  }
  // The call's span names the tenant it acts in (docs/observability.md "Spans").
  annotateActive({ "gateway.tenant_id": tenant.id });
  return tenant;
}

/** `requireTenantAccess` for a kind of operation: `tenantAccess(services, principal, id, "publish")`. */
export function tenantAccess(deps: AccessDeps, principal: Principal, tenantId: string, access: TenantAccess): Promise<Tenant> {
  return requireTenantAccess(deps, principal, tenantId, TENANT_ACCESS[access]);
}

/** The named tenant (checked), or the caller's personal tenant when none is named. */
export async function tenantOrPersonal(
  deps: AccessDeps,
  principal: Principal,
  tenantId: string | undefined,
  need: Role = "viewer",
): Promise<Tenant> {
  if (tenantId) return requireTenantAccess(deps, principal, tenantId, need);
  const user = await deps.users.get(principal.userId);
  if (!user) throw new ServiceError("UNAUTHORIZED", "Invalid or expired API key");
  return requireTenantAccess(deps, principal, user.tenantId, need);
}

/** True when the user is a member of the tenant with at least `need` (a quiet check for filters). */
export async function reaches(deps: AccessDeps, userId: string, tenantId: string, need: Role = "viewer"): Promise<boolean> {
  const user = await deps.users.get(userId);
  if (!user) return false;
  // A personal tenant keeps its user as owner (docs/tenants.md), made or not yet.
  if (user.tenantId === tenantId) return true;
  const tenant = await deps.tenants.getTenant(tenantId);
  if (!tenant) return false;
  const role = await roleIn(deps, userId, tenant);
  return role !== null && roleAllows(role, need);
}

/**
 * Every tenant the user is a member of, with their role: the personal one first, then the
 * others oldest first.
 */
export async function tenantsOf(deps: AccessDeps, principal: Principal): Promise<{ tenant: Tenant; role: Role }[]> {
  const user = await deps.users.get(principal.userId);
  if (!user) return [];
  const personal = await personalOf(deps, user);
  // Tenants created before roles are indexed under their creator only.
  const ids = new Set([...(await deps.members.tenantIdsOf(user.id)), ...(await deps.agents.ownedTenantIds(user.id))]);
  ids.delete(personal.id);
  const out: { tenant: Tenant; role: Role }[] = [];
  const personalRole = await roleIn(deps, user.id, personal);
  if (personalRole) out.push({ tenant: personal, role: personalRole });
  const others: { tenant: Tenant; role: Role }[] = [];
  for (const id of ids) {
    const tenant = await deps.tenants.getTenant(id);
    if (!tenant) continue;
    const role = await roleIn(deps, user.id, tenant);
    if (role) others.push({ tenant, role });
  }
  others.sort((a, b) => a.tenant.createdAt.localeCompare(b.tenant.createdAt));
  return [...out, ...others];
}
