import { toolSourceOf } from "../metrics.js";
import { inSpan, SpanKind, tracingEnabled } from "../tracing.js";
import type { ToolResult } from "./types.js";

/**
 * Runs one tool call, while tracing in a span (`execute_tool <name>`: the tool, its source kind
 * (builtin, mcp, vm), the tenant, the outcome; never the arguments or the result). An upstream
 * MCP server or a VM receives the span as the `traceparent` of the request's `_meta`
 * (docs/observability.md "Traces"). Without tracing, `call()` and nothing else.
 */
export function toolSpan(name: string, tenantId: string | undefined, call: () => Promise<ToolResult>): Promise<ToolResult> {
  if (!tracingEnabled()) return call();
  const attributes = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": name,
    "gateway.tool.source": toolSourceOf(name),
    ...(tenantId ? { "gateway.tenant_id": tenantId } : {}),
  };
  return inSpan(`execute_tool ${name}`, SpanKind.INTERNAL, attributes, async (span) => {
    const result = await call();
    span?.setAttribute("gateway.tool.outcome", result.isError ? "tool_error" : "ok");
    return result;
  });
}
