import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { McpServerRecord } from "../../storage/repos/mcp-servers.js";
import { NAMESPACE_SEPARATOR } from "../../rpc/tools/sources.js";
import { announcementProblem, TOOL_BOUNDS } from "../../rpc/tools/tool-bounds.js";
import type { ToolDef } from "../../rpc/tools/types.js";

/** An announcement outside the bounds (docs/security.md "Input bounds"): the server is marked unhealthy with it. */
export class OutOfBounds extends Error {
  override name = "OutOfBounds";
}

/** Pages of a list read at most (tools/list, resources/list, prompts/list). */
export const MAX_PAGES = 50;

/** An upstream server's tools as catalog entries, and the names of those that declare an output schema. */
export interface AnnouncedTools {
  tools: ToolDef[];
  /** The server's own names of its tools with an output schema: their results are checked by the SDK client. */
  withOutputSchema: Set<string>;
}

/**
 * Every page of the server's `tools/list` (at most MAX_PAGES), checked against the bounds
 * (OutOfBounds past them), as catalog entries `<server>__<tool>` of source `sourceId`.
 */
export async function listAnnouncedTools(
  client: Client,
  record: McpServerRecord,
  sourceId: string,
  timeoutMs: number,
): Promise<AnnouncedTools> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const result = await client.listTools(cursor ? { cursor } : {}, { timeout: timeoutMs });
    tools.push(...result.tools);
    // Stop paging as soon as the count is out of bounds: no need to read the rest.
    if (tools.length > TOOL_BOUNDS.maxToolsPerSource) break;
    cursor = result.nextCursor;
    if (!cursor) break;
  }
  const problem = announcementProblem(tools);
  const withOutputSchema = new Set(tools.filter((tool) => tool.outputSchema !== undefined).map((tool) => tool.name));
  if (problem) throw new OutOfBounds(`MCP server ${record.name} ${problem.startsWith("tool ") ? "announced " : ""}${problem}`);
  return {
    withOutputSchema,
    tools: tools.map((tool) => ({
      name: `${record.name}${NAMESPACE_SEPARATOR}${tool.name}`,
      description: tool.description ?? tool.title ?? "",
      inputSchema: tool.inputSchema as Record<string, unknown>,
      category: record.category,
      source: { kind: "mcp", id: sourceId, server: record.name, tool: tool.name },
      ...(record.tenantId === null ? {} : { owner: record.tenantId }),
    })),
  };
}
