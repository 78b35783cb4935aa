import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

/** A failure of an upstream server as its health and log lines say it (docs/mcp.md "Upstream MCP servers"). */
export function describeError(error: unknown, timeoutMs: number): string {
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) return `no answer within ${Math.round(timeoutMs / 1000)} s`;
  // The HTTP status of a refusal, which the SDK keeps out of its message (a 401 makes the gateway refresh its own token).
  if (error instanceof StreamableHTTPError && typeof error.code === "number" && error.code >= 400)
    return `HTTP ${error.code}: ${error.message}`;
  if (error instanceof Error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ? `${error.message} (${cause.code})` : error.message;
  }
  return String(error);
}
