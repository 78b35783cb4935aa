import type { ClientRelay } from "../relay.js";
export type { ClientRelay, ClientRequest } from "../relay.js";
/** The tool catalog's shapes, shared by the rpc domains (through `services`) and the bridge sources that implement them. */

/** A JSON Schema object describing a tool's arguments. */
export type JsonSchema = Record<string, unknown>;

export interface ToolDef {
  /** Unique across the catalog: built-ins bare, upstream MCP tools `<server>__<tool>`, VM tools `vm__<vmId>__<tool>` (or as the VM source chooses). */
  name: string;
  description: string;
  inputSchema: JsonSchema;
  category: string;
  /** Where the tool runs; `server` is an upstream MCP server's own name. */
  source: { kind: "builtin" | "mcp" | "vm"; id: string; server?: string };
  /**
   * The tenant the tool belongs to (its upstream MCP server's or VM's); absent for tools every
   * tenant sees (built-ins, servers an operator shared). Names are unique within one scope,
   * not across the whole catalog: two tenants may each have a server called `docs`.
   */
  owner?: string;
}

/**
 * Whose view of the catalog (docs/architecture.md "Ownership"): a tenant sees shared tools and its own;
 * internal services (PLATFORM_SERVICE_KEY) see shared tools and every VM's, never a tenant's
 * private upstream servers (those run with the tenant's stored credentials).
 */
export type ToolScope = { tenantId: string } | { service: true };

/** The scope of a call or listing: a tenant's, or with none given the internal services'. */
export function toolScope(tenantId: string | undefined): ToolScope {
  return tenantId === undefined ? { service: true } : { tenantId };
}

export function visibleIn(tool: ToolDef, scope: ToolScope): boolean {
  if (tool.owner === undefined) return true;
  return "tenantId" in scope ? tool.owner === scope.tenantId : tool.source.kind === "vm";
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
  /** The caller's tenant: only its tools and shared ones resolve (absent: internal services, see ToolScope). */
  tenantId?: string;
  vmId?: string;
  /** The caller listens for progress: a source that can report it (an upstream MCP server) does. */
  onProgress?(update: { progress: number; total?: number; message?: string }): void;
  /** The MCP client session that made the call, for the upstream server's requests during it (sampling, elicitation, roots). */
  relay?: ClientRelay;
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
