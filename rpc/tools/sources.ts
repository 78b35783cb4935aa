import { ServiceError } from "../errors.js";

/** Upstream MCP tools are `<server>__<tool>` in the catalog (docs/mcp.md). */
export const NAMESPACE_SEPARATOR = "__";

/** The catalog name of a VM tool: `vm__<vmId>__<tool>` (the catalog maps it back; names are never parsed). */
export function catalogName(vmId: string, tool: string): string {
  return `vm__${vmId}__${tool}`;
}

export function vmNotConnected(vmId: string): ServiceError {
  // docs/vm-agents.md: 503, because a VM that reconnects makes the same call succeed later.
  return new ServiceError("UNAVAILABLE", `No VM agent is connected with vmId ${vmId}`, { details: { vmId, reason: "vm_not_connected" } });
}
