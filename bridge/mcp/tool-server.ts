import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "../../rpc/auth.js";
import type { Dispatcher } from "../../rpc/dispatcher.js";
import type { ToolDef } from "../../rpc/tools/types.js";
import { renderError } from "../../rpc/transport/surfaces.js";

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

/** Who is calling in the HTTP request being served, as the endpoint admitted them. */
export interface McpCaller {
  principal: Principal;
  requestId: string;
}

/**
 * One MCP server per session, a codec over registry methods: tools/list is
 * `bridge.mcp.tools.list`, tools/call is `bridge.mcp.tools.call`, both through the dispatcher
 * with the caller the endpoint admitted for this request. The low-level `Server` takes JSON
 * Schemas as they come from built-ins, upstream servers and VMs.
 */
export function createToolServer(dispatcher: Dispatcher, caller: () => McpCaller): Server {
  const call = (method: string, params: unknown, signal: AbortSignal) => {
    const { principal, requestId } = caller();
    return dispatcher.dispatch(method, params, {
      requestId,
      surface: "bridge",
      presented: {},
      authenticated: principal,
      signal,
      responseHeaders: new Headers(),
      ip: "",
    });
  };
  const server = new Server(
    { name: "chat-agent-tool-gateway", title: "Tool bridge", version: "0.1.0" },
    {
      // logging: the SDK answers logging/setLevel per session and filters sendLoggingMessage by it.
      capabilities: { tools: { listChanged: true }, logging: {} },
      instructions: "Tools of the gateway's catalog: built-ins, upstream MCP servers (`<server>__<tool>`) and connected VM agents (`vm__<vmId>__<tool>`).",
    },
  );

  server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
    const tools = (await call("bridge.mcp.tools.list", {}, extra.signal)) as ToolDef[];
    const offset = decodeCursor(request.params?.cursor);
    const page = tools.slice(offset, offset + PAGE_SIZE);
    const next = offset + PAGE_SIZE < tools.length ? Buffer.from(String(offset + PAGE_SIZE)).toString("base64url") : undefined;
    return { tools: page.map(toMcpTool), ...(next ? { nextCursor: next } : {}) };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name, arguments: args } = request.params;
    const started = performance.now();
    // The gateway's own messages (logger "gateway"), delivered on the session's GET stream.
    const note = (level: "debug" | "warning" | "error", data: Record<string, unknown>) => {
      if (extra.sessionId) void server.sendLoggingMessage({ level, logger: "gateway", data: { tool: name, durationMs: Math.round(performance.now() - started), ...data } }, extra.sessionId).catch(() => undefined);
    };
    try {
      const result = (await call("bridge.mcp.tools.call", { name, arguments: args ?? {} }, extra.signal)) as CallToolResult;
      note(result.isError ? "warning" : "debug", { message: result.isError ? "tool answered with an error" : "tool call finished" });
      return result;
    } catch (thrown) {
      // Masked and logged like every transport's errors.
      const { error } = renderError("bridge", thrown, caller().requestId, dispatcher.services.log);
      note("error", { message: error.message, code: error.code });
      if (error.code === "INTERNAL") throw new McpError(ErrorCode.InternalError, "Internal error");
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
