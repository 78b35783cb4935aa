import type { CallOptions, JsonSchema, ToolResult } from "../../../rpc/tools/types.js";

/** One built-in tool: its catalog entry and what it does. Args arrive already schema-checked. */
export interface BuiltinTool {
  name: string;
  description: string;
  category: string;
  inputSchema: JsonSchema;
  run(args: Record<string, unknown>, options: CallOptions): Promise<ToolResult>;
}

/** A successful result: a text block for any MCP client plus the same data structured. */
export function okResult(text: string, structured: Record<string, unknown>): ToolResult {
  return { content: [{ type: "text", text }], structuredContent: structured };
}

/**
 * A failure the caller (often a model) should read and act on — bad expression, refused
 * address, unknown timezone. MCP reports these as results with isError, not protocol errors.
 */
export function errorResult(message: string): ToolResult {
  return { content: [{ type: "text", text: message }], isError: true };
}
