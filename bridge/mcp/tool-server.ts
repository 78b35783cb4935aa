import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "../../rpc/auth.js";
import { describe } from "../../rpc/errors.js";
import { isServiceError } from "../../rpc/errors.js";
import type { Services } from "../../rpc/services.js";
import type { ToolDef } from "../../rpc/tools/types.js";
import { executeTool } from "../../rpc/tools/execute.js";
import { visibleTools } from "../../rpc/tools/visible-tools.js";

/** tools/list page size; the cursor is an opaque offset into the sorted catalog. */
const PAGE_SIZE = 500;

function toMcpTool(tool: ToolDef): Tool {
  // MCP requires an object schema at the top level; sources that omit `type` still describe objects.
  const inputSchema = { type: "object", ...tool.inputSchema } as Tool["inputSchema"];
  return { name: tool.name, description: tool.description, inputSchema, _meta: { category: tool.category, source: tool.source.kind } };
}

function decodeCursor(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  const offset = Number(Buffer.from(cursor, "base64url").toString("utf8"));
  if (!Number.isInteger(offset) || offset < 0) throw new McpError(ErrorCode.InvalidParams, "Invalid cursor");
  return offset;
}

/**
 * One MCP server per session, answering tools/list and tools/call from the catalog. The
 * low-level `Server` takes JSON Schemas as they come from built-ins, upstream servers and VMs.
 */
export function createToolServer(services: Services, principal: () => Principal): Server {
  const server = new Server(
    { name: "chat-agent-tool-gateway", title: "Tool bridge", version: "0.1.0" },
    {
      capabilities: { tools: { listChanged: true } },
      instructions: "Tools of the gateway's catalog: built-ins, upstream MCP servers (`<server>__<tool>`) and connected VM agents (`vm__<vmId>__<tool>`).",
    },
  );

  server.setRequestHandler(ListToolsRequestSchema, async (request) => {
    const tools = await visibleTools(services, principal());
    const offset = decodeCursor(request.params?.cursor);
    const page = tools.slice(offset, offset + PAGE_SIZE);
    const next = offset + PAGE_SIZE < tools.length ? Buffer.from(String(offset + PAGE_SIZE)).toString("base64url") : undefined;
    return { tools: page.map(toMcpTool), ...(next ? { nextCursor: next } : {}) };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name, arguments: args } = request.params;
    try {
      return (await executeTool(services, name, args ?? {}, { principal: principal(), signal: extra.signal })) as CallToolResult;
    } catch (error) {
      if (!isServiceError(error)) {
        services.log.error({ error: describe(error), mcp: "tools/call", tool: name });
        throw new McpError(ErrorCode.InternalError, "Internal error");
      }
      // MCP 2025-11-25 "Error Handling": an unknown tool is a protocol error (-32602) ...
      if (error.code === "NOT_FOUND") throw new McpError(ErrorCode.InvalidParams, error.message);
      // ... while bad arguments and failures of the tool itself are results the model can read.
      const issues = error.code === "VALIDATION_FAILED" ? (error.details as { issues?: unknown[] } | undefined)?.issues : undefined;
      return {
        content: [{ type: "text", text: error.message }],
        isError: true,
        structuredContent: { error: { code: error.code, message: error.message, ...(issues ? { issues } : {}) } },
      };
    }
  });

  return server;
}
