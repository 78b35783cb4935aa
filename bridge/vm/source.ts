import { ServiceError } from "../../rpc/errors.js";
import type { ToolDef, ToolSource } from "../../rpc/tools/types.js";
import type { VmDirectory } from "../../rpc/tools/ports.js";
import { catalogName } from "../../rpc/tools/sources.js";

/** Catalog id of the VM tool source. */
export const VM_SOURCE_ID = "vms";

/**
 * The tools of every connected VM, on any instance, as catalog entries named
 * `vm__<vmId>__<tool>` with the VM's category or `vm` (docs/vm-agents.md "Tool names").
 */
export function vmToolSource(hub: VmDirectory): ToolSource {
  return {
    id: VM_SOURCE_ID,
    async list(): Promise<ToolDef[]> {
      return (await hub.list()).flatMap((record) =>
        record.tools.map((tool) => ({
          name: catalogName(record.vmId, tool.name),
          description: tool.description || `${tool.name} on VM ${record.vmId}`,
          inputSchema: tool.inputSchema,
          category: tool.category ?? "vm",
          // The VM and its own name for the tool: a call goes there with no lookup of the name
          // (`vm__<vmId>__<tool>`, where both parts may contain `__`, is never parsed).
          source: { kind: "vm" as const, id: VM_SOURCE_ID, vmId: record.vmId, tool: tool.name },
          // A VM's tools belong to the tenant that owns its vmId (bridge/vm/ownership.ts).
          owner: record.tenantId,
        })),
      );
    },
    async call(tool, args, options) {
      const { vmId, tool: name } = tool.source;
      // A caller scoped to a tenant never reaches another tenant's VM (same answer as an unknown tool).
      if (vmId === undefined || name === undefined || (options.tenantId !== undefined && tool.owner !== options.tenantId))
        throw new ServiceError("NOT_FOUND", `Unknown tool: ${tool.name}`);
      if (options.vmId && options.vmId !== vmId) throw new ServiceError("NOT_FOUND", `Unknown tool: ${tool.name}`);
      // A VM that left since the listing is answered 503 by the hub (vm_not_connected).
      return hub.call(vmId, name, args, { timeoutMs: options.timeoutMs, signal: options.signal });
    },
  };
}
