import * as v from "valibot";
import { ServiceError } from "../errors.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { ROLES, type Membership, type Role } from "../../storage/repos/members.js";
import { nowIso } from "../../storage/ids.js";
import { requireTenantAccess, roleIn } from "./access.js";
import { emitEvent } from "../event-sink.js";
import { recordAudit } from "../audit.js";
import { tenantsDomain, type TenantsDeps } from "./deps.js";

const TenantId = v.pipe(v.string("tenant_id must be a string"), v.minLength(1), v.maxLength(128));
const MemberId = v.pipe(v.string("member_id must be a string"), v.minLength(1), v.maxLength(128));
const RoleField = v.picklist(ROLES, `role must be one of: ${ROLES.join(", ")}`);
const AUTH = { kinds: ["session", "gateway_key"] } as const;

const MemberView = v.object({
  userId: v.string(),
  email: v.string(),
  fullName: v.string(),
  role: v.picklist(ROLES),
  addedBy: v.string(),
  addedAt: v.string(),
  updatedAt: v.string(),
});

async function memberView(deps: TenantsDeps, membership: Membership) {
  const user = await deps.users.get(membership.userId);
  return {
    userId: membership.userId,
    email: user?.email ?? "",
    fullName: user?.fullName ?? "",
    role: membership.role,
    addedBy: membership.addedBy,
    addedAt: membership.addedAt,
    updatedAt: membership.updatedAt,
  };
}

/** Every member, the creator of a never-shared tenant included (its implicit owner). */
async function membersOf(deps: TenantsDeps, tenant: Tenant): Promise<Membership[]> {
  const records = await deps.members.list(tenant.id);
  if (records.some((record) => record.userId === tenant.ownerId) || (await deps.members.seeded(tenant.id))) return records;
  const creator: Membership = {
    tenantId: tenant.id,
    userId: tenant.ownerId,
    role: "owner",
    addedBy: tenant.ownerId,
    addedAt: tenant.createdAt,
    updatedAt: tenant.createdAt,
  };
  return [creator, ...records];
}

const notMember = (memberId: string) => new ServiceError("NOT_FOUND", `Member not found: ${memberId}`);

/**
 * The rules every change to a member obeys (docs/tenants.md "Members"), under the tenant's
 * member lock so two owners removing each other cannot both win:
 * - only owners grant, change or take away the owner role;
 * - the last owner cannot be removed or demoted (409);
 * - a user's personal tenant keeps them as its owner (409).
 */
async function changeMember(
  deps: TenantsDeps,
  callerId: string,
  tenant: Tenant,
  memberId: string,
  next: Role | null,
): Promise<Membership | null> {
  return deps.members.withLock(tenant.id, async () => {
    await deps.members.seed(tenant.id, tenant.ownerId, tenant.createdAt);
    const [caller, target] = await Promise.all([deps.members.get(tenant.id, callerId), deps.members.get(tenant.id, memberId)]);
    if (!target) throw notMember(memberId);
    const self = callerId === memberId;
    const callerRole = caller?.role;
    // Anyone may leave; every other change needs an admin, and the owner role an owner.
    if (!(self && next === null) && callerRole !== "admin" && callerRole !== "owner") {
      throw new ServiceError("FORBIDDEN", `Your role in tenant ${tenant.slug} is ${callerRole}; managing members needs admin or above`, {
        details: { required: "admin" },
      });
    }
    if ((target.role === "owner" || next === "owner") && !self && callerRole !== "owner") {
      throw new ServiceError("FORBIDDEN", "Only an owner can grant, change or remove the owner role", { details: { required: "owner" } });
    }
    if (self && next === "owner" && callerRole !== "owner") {
      throw new ServiceError("FORBIDDEN", "Only an owner can grant the owner role", { details: { required: "owner" } });
    }
    if (target.role === "owner" && next !== "owner") {
      const owners = (await deps.members.list(tenant.id)).filter((member) => member.role === "owner");
      if (owners.length <= 1) {
        throw new ServiceError("CONFLICT", `${memberId} is the last owner of tenant ${tenant.slug}; make another member owner first`, {
          details: { tenantId: tenant.id, reason: "last_owner" },
        });
      }
      const user = await deps.users.get(memberId);
      if (user?.tenantId === tenant.id) {
        throw new ServiceError("CONFLICT", `Tenant ${tenant.slug} is ${user.email}'s personal tenant; they stay its owner`, {
          details: { tenantId: tenant.id, reason: "personal_tenant" },
        });
      }
    }
    if (next === null) {
      await deps.members.remove(tenant.id, memberId);
      return null;
    }
    return deps.members.put({ ...target, role: next, updatedAt: nowIso() });
  });
}

/** Tenant members and roles (docs/interface.md 4.4 `/tenants/{tenant_id}/members`, docs/tenants.md). */
export const memberMethods = [
  tenantsDomain.method({
    name: "tenants.members.list",
    summary:
      "The tenant's members with their roles, oldest first. Any member may read it; a non-member gets the same 404 as for a missing tenant.",
    input: v.object({ tenant_id: TenantId }),
    auth: AUTH,
    output: v.object({ members: v.array(MemberView), count: v.number() }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/tenants/:tenant_id/members" }],
    async handler(params, ctx) {
      const tenant = await requireTenantAccess(ctx.deps, ctx.principal, params.tenant_id, "viewer");
      const members = await Promise.all((await membersOf(ctx.deps, tenant)).map((member) => memberView(ctx.deps, member)));
      return { members, count: members.length };
    },
  }),

  tenantsDomain.method({
    name: "tenants.members.add",
    summary:
      "Admins: add an existing user (by `userId` or `email`) with a `role` (owner, admin, member, viewer; only " +
      "owners grant owner). 404 for an unknown user, 409 when already a member.",
    input: v.pipe(
      v.object({
        tenant_id: TenantId,
        userId: v.optional(v.pipe(v.string("userId must be a string"), v.minLength(1), v.maxLength(128))),
        email: v.optional(
          v.pipe(v.string("email must be a string"), v.trim(), v.email("email must be an email address"), v.maxLength(254)),
        ),
        role: RoleField,
      }),
      v.check((body) => (body.userId === undefined) !== (body.email === undefined), "Give exactly one of userId or email"),
    ),
    auth: AUTH,
    output: MemberView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {}, CONFLICT: {}, VALIDATION_FAILED: {} },
    http: [{ surface: "gateway", method: "POST", path: "/tenants/:tenant_id/members", status: 201 }],
    async handler(params, ctx) {
      const { deps, principal } = ctx;
      const tenant = await requireTenantAccess(deps, principal, params.tenant_id, params.role === "owner" ? "owner" : "admin");
      const user = params.userId ? await deps.users.get(params.userId) : await deps.users.byEmail(params.email!);
      if (!user) throw new ServiceError("NOT_FOUND", `No user with ${params.userId ? `id ${params.userId}` : `email ${params.email}`}`);
      const added = await deps.members.withLock(tenant.id, async () => {
        await deps.members.seed(tenant.id, tenant.ownerId, tenant.createdAt);
        if (await roleIn(deps, user.id, tenant)) {
          throw new ServiceError("CONFLICT", `${user.email} is already a member of tenant ${tenant.slug}`, {
            details: { userId: user.id },
          });
        }
        const now = nowIso();
        return deps.members.put({
          tenantId: tenant.id,
          userId: user.id,
          role: params.role,
          addedBy: principal.userId,
          addedAt: now,
          updatedAt: now,
        });
      });
      emitEvent(deps, tenant.id, "member.added", { tenantId: tenant.id, userId: user.id, role: params.role });
      await recordAudit(ctx, { action: "member.added", target: user.id, tenantId: tenant.id, changes: { role: params.role } });
      return memberView(deps, added);
    },
  }),

  tenantsDomain.method({
    name: "tenants.members.update",
    summary:
      "Admins: change a member's role; only owners grant or take away owner (this is how ownership is transferred). The last owner cannot be demoted (409).",
    input: v.object({ tenant_id: TenantId, member_id: MemberId, role: RoleField }),
    auth: AUTH,
    output: MemberView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {}, CONFLICT: {}, VALIDATION_FAILED: {} },
    http: [{ surface: "gateway", method: "PATCH", path: "/tenants/:tenant_id/members/:member_id" }],
    async handler(params, ctx) {
      const tenant = await requireTenantAccess(ctx.deps, ctx.principal, params.tenant_id, "viewer");
      const updated = await changeMember(ctx.deps, ctx.principal.userId, tenant, params.member_id, params.role);
      emitEvent(ctx.deps, tenant.id, "member.role_changed", { tenantId: tenant.id, userId: params.member_id, role: params.role });
      await recordAudit(ctx, {
        action: "member.role_changed",
        target: params.member_id,
        tenantId: tenant.id,
        changes: { role: params.role },
      });
      return memberView(ctx.deps, updated!);
    },
  }),

  tenantsDomain.method({
    name: "tenants.members.remove",
    summary:
      "Admins: remove a member (any member may remove themselves; removing an owner needs an owner). The last owner " +
      "cannot be removed (409). The removed user loses access at once, open MCP sessions and agent streams included, " +
      "on their next message.",
    input: v.object({ tenant_id: TenantId, member_id: MemberId }),
    auth: AUTH,
    output: v.object({ success: v.boolean(), userId: v.string() }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {}, CONFLICT: {} },
    http: [{ surface: "gateway", method: "DELETE", path: "/tenants/:tenant_id/members/:member_id" }],
    async handler(params, ctx) {
      const tenant = await requireTenantAccess(ctx.deps, ctx.principal, params.tenant_id, "viewer");
      await changeMember(ctx.deps, ctx.principal.userId, tenant, params.member_id, null);
      emitEvent(ctx.deps, tenant.id, "member.removed", { tenantId: tenant.id, userId: params.member_id });
      await recordAudit(ctx, { action: "member.removed", target: params.member_id, tenantId: tenant.id });
      return { success: true, userId: params.member_id };
    },
  }),
];
