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
  // `vm__<vmId>__<tool>`: both parts may contain `__`, so each split point is tried; a lookup
  // by vmId is one map read (or one directory read), not a walk over every connected VM.
  const resolve = async (name: string) => {
    const prefix = "vm__";
    if (!name.startsWith(prefix)) return undefined;
    for (let at = name.indexOf("__", prefix.length + 1); at !== -1; at = name.indexOf("__", at + 1)) {
      const record = await hub.find(name.slice(prefix.length, at));
      const tool = record?.tools.find((candidate) => catalogName(record.vmId, candidate.name) === name);
      if (record && tool) return { record, tool };
    }
    return undefined;
  };
  return {
    id: VM_SOURCE_ID,
    async list(): Promise<ToolDef[]> {
      return (await hub.list()).flatMap((record) =>
        record.tools.map((tool) => ({
          name: catalogName(record.vmId, tool.name),
          description: tool.description || `${tool.name} on VM ${record.vmId}`,
          inputSchema: tool.inputSchema,
          category: tool.category ?? "vm",
          source: { kind: "vm" as const, id: VM_SOURCE_ID },
          // A VM's tools belong to the tenant that owns its vmId (bridge/vm/ownership.ts).
          owner: record.tenantId,
        })),
      );
    },
    async call(name, args, options) {
      const found = await resolve(name);
      // A caller scoped to a tenant never reaches another tenant's VM (same answer as an unknown tool).
      if (!found || (options.tenantId !== undefined && found.record.tenantId !== options.tenantId))
        throw new ServiceError("NOT_FOUND", `Unknown tool: ${name}`);
      if (options.vmId && options.vmId !== found.record.vmId) throw new ServiceError("NOT_FOUND", `Unknown tool: ${name}`);
      return hub.call(found.record.vmId, found.tool.name, args, { timeoutMs: options.timeoutMs, signal: options.signal });
    },
  };
}
