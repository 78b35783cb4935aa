import type { Principal } from "../auth.js";
import type { Services } from "../services.js";
import type { ToolDef, ToolScope } from "./types.js";

/**
 * The catalog scope of a caller (DESIGN "Ownership"): a user sees the built-ins, shared
 * upstream servers, and the upstream servers and VMs of their own tenant; another tenant's
 * tools are not listed, and calling one is refused with the same 404 as an unknown tool.
 * Internal services (PLATFORM_SERVICE_KEY) see shared tools and every VM's.
 */
export async function scopeOfPrincipal(services: Services, principal: Principal): Promise<ToolScope> {
  if (principal.kind === "service") return { service: true };
  const tenantId = (await services.users.get(principal.userId))?.tenantId;
  // A user without a record has no tenant: the shared tools only (no tenant id matches "").
  return { tenantId: tenantId ?? "" };
}

/** The catalog as one caller sees it. */
export async function visibleTools(services: Services, principal: Principal, filter: { category?: string } = {}): Promise<ToolDef[]> {
  return services.catalog.list({ ...filter, scope: await scopeOfPrincipal(services, principal) });
}

/** One tool if this caller may see it. */
export async function visibleTool(services: Services, principal: Principal, name: string): Promise<ToolDef | undefined> {
  return services.catalog.get(name, await scopeOfPrincipal(services, principal));
}
