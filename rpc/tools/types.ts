/** The tool catalog's shapes, shared by the rpc domains (through `services`) and the bridge sources that implement them. */

/** A JSON Schema object describing a tool's arguments. */
export type JsonSchema = Record<string, unknown>;

export interface ToolDef {
  /** Unique across the catalog: built-ins bare, upstream MCP tools `<server>__<tool>`, VM tools `vm__<vmId>__<tool>` (or as the VM source chooses). */
  name: string;
  description: string;
  inputSchema: JsonSchema;
  category: string;
  /** Where the tool runs. */
  source: { kind: "builtin" | "mcp" | "vm"; id: string };
}

/** MCP's CallToolResult shape: what every source returns. */
export interface ToolResult {
  content: { type: string; text?: string; [key: string]: unknown }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Upper bound for the call; the source fails it with TIMEOUT past this. */
  timeoutMs: number;
  /** Principal context for sources that scope tools (tenant, VM). */
  tenantId?: string;
  vmId?: string;
}

/**
 * One origin of tools (built-ins, one upstream MCP server, the connected VMs). A source owns
 * the names it lists; the catalog never calls a source for a name it did not list.
 */
export interface ToolSource {
  readonly id: string;
  list(): Promise<ToolDef[]>;
  call(name: string, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult>;
}
