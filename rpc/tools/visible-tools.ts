import type { Principal } from "../auth.js";
import type { ToolDef, ToolScope } from "./types.js";
import type { ToolsDeps } from "./deps.js";
import type { Repos } from "../repos.js";
import { allowanceOf } from "../allow-list.js";

/**
 * The catalog scope of a caller (docs/architecture.md "Ownership"): a user sees the built-ins, shared
 * upstream servers, and the upstream servers and VMs of their own tenant; another tenant's
 * tools are not listed, and calling one is refused with the same 404 as an unknown tool.
 * Internal services (PLATFORM_SERVICE_KEY) see shared tools and every VM's.
 */
export async function scopeOfPrincipal(deps: Pick<Repos, "users" | "tenants">, principal: Principal): Promise<ToolScope> {
  if (principal.kind === "service") return { service: true };
  // The key's and the tenant's tool allow-lists hold every listing and call in this scope (docs/access-control.md).
  const allowed = (await allowanceOf(deps, principal)).tools;
  // An OAuth access token reaches the one tenant its consent named (docs/mcp.md "Sign-in and consent").
  if (principal.tenantId !== undefined) return { tenantId: principal.tenantId, allowed };
  const tenantId = (await deps.users.get(principal.userId))?.tenantId;
  // A user without a record has no tenant: the shared tools only (no tenant id matches "").
  return { tenantId: tenantId ?? "", allowed };
}

/** The catalog as one caller sees it. */
export async function visibleTools(deps: ToolsDeps, principal: Principal, filter: { category?: string } = {}): Promise<ToolDef[]> {
  return deps.catalog.list({ ...filter, scope: await scopeOfPrincipal(deps, principal) });
}

/** One tool if this caller may see it. */
export async function visibleTool(deps: ToolsDeps, principal: Principal, name: string): Promise<ToolDef | undefined> {
  return deps.catalog.get(name, await scopeOfPrincipal(deps, principal));
}
