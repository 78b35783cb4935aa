import type { Principal } from "../auth.js";
import type { Services } from "../services.js";
import type { ToolDef } from "./types.js";
import { catalogName } from "./sources.js";

/**
 * The catalog as one caller sees it: VM tools only of VMs serving the caller's tenant, so a
 * listing never reveals another tenant's VM ids (calling them is already refused with the
 * same 404 as an unknown tool, bridge/vm/source.ts). Internal services (PLATFORM_SERVICE_KEY)
 * see everything.
 */
export async function visibleTools(services: Services, principal: Principal, filter: { category?: string } = {}): Promise<ToolDef[]> {
  const tools = await services.catalog.list(filter);
  if (principal.kind === "service" || !tools.some((tool) => tool.source.kind === "vm")) return tools;
  const tenantId = (await services.users.get(principal.userId))?.tenantId;
  const own = new Set<string>();
  for (const record of await services.vms.list()) {
    if (record.tenantId !== tenantId) continue;
    for (const tool of record.tools) own.add(catalogName(record.vmId, tool.name));
  }
  return tools.filter((tool) => tool.source.kind !== "vm" || own.has(tool.name));
}

/** One tool if this caller may see it. */
export async function visibleTool(services: Services, principal: Principal, name: string): Promise<ToolDef | undefined> {
  const tool = await services.catalog.get(name);
  if (!tool || tool.source.kind !== "vm") return tool;
  return (await visibleTools(services, principal, { category: tool.category })).find((candidate) => candidate.name === name);
}
