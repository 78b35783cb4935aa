import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import type { Workspace } from "../../storage/repos/tenants.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { roleAllows, roleIn, type AccessDeps, type Role } from "../tenants/access.js";

/**
 * A workspace of a tenant the caller is a member of, with at least `need`: a non-member gets
 * the same 404 as for a missing workspace, a member whose role is too weak 403.
 */
export async function requireWorkspace(
  deps: AccessDeps,
  principal: Principal,
  workspaceId: string,
  need: Role = "viewer",
): Promise<{ workspace: Workspace; tenant: Tenant; role: Role }> {
  const workspace = await deps.tenants.getWorkspace(workspaceId);
  const tenant = workspace ? await deps.tenants.getTenant(workspace.tenantId) : null;
  const role = tenant ? await roleIn(deps, principal.userId, tenant) : null;
  if (!workspace || !tenant || !role) throw new ServiceError("NOT_FOUND", `Workspace not found: ${workspaceId}`);
  if (!roleAllows(role, need)) {
    throw new ServiceError("FORBIDDEN", `Your role in tenant ${tenant.slug} is ${role}; this needs ${need} or above`, {
      details: { tenantId: tenant.id, role, required: need },
    });
  }
  return { workspace, tenant, role };
}

/** An archived workspace takes nothing new (docs/tenants.md "Workspaces"). */
export function requireActive(workspace: Workspace, what: string): void {
  if (workspace.status === "archived") {
    throw new ServiceError(
      "FORBIDDEN",
      `Workspace ${workspace.id} is archived: ${what}; an admin can reactivate it with PATCH /workspaces/${workspace.id}?status=active`,
      {
        details: { reason: "workspace_archived", workspaceId: workspace.id },
      },
    );
  }
}
