import type { ClientRelay } from "../relay.js";
import { allowedBy, type PatternLists } from "../allow-list.js";
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
  /**
   * Where the tool runs: the catalog source's id and, for the source's own use when the call
   * comes, what it needs to reach the tool without looking it up again — `server` an upstream
   * MCP server's own name, `vmId` the VM's, `tool` the tool's name at that server or VM.
   */
  source: { kind: "builtin" | "mcp" | "vm"; id: string; server?: string; vmId?: string; tool?: string };
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
export type ToolScope =
  | {
      tenantId: string;
      /**
       * The caller's tool allow-lists (rpc/allow-list.ts, docs/access-control.md): a tool they do
       * not allow is neither listed nor resolved, so calling it is the same 404 as an unknown tool.
       */
      allowed?: PatternLists;
    }
  | { service: true };

/** The scope of a call or listing: a tenant's, or with none given the internal services'. */
export function toolScope(tenantId: string | undefined): ToolScope {
  return tenantId === undefined ? { service: true } : { tenantId };
}

export function visibleIn(tool: ToolDef, scope: ToolScope): boolean {
  if ("tenantId" in scope && !allowedBy(scope.allowed, tool.name)) return false;
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
 * the names it lists; the catalog never calls a source for a tool it did not list.
 */
export interface ToolSource {
  readonly id: string;
  list(): Promise<ToolDef[]>;
  /**
   * Runs `tool`, one of the entries this source listed, as the catalog resolved it: the source
   * reaches the tool from the entry (`tool.source`) and looks nothing up again.
   */
  call(tool: ToolDef, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult>;
}

/**
 * A tool name resolved once in a caller's scope (as agentgateway resolves a call to its
 * target before running it): the catalog entry and the source that runs it. A call is
 * resolved once and the resolution passed along; nothing on the way looks the name up again.
 */
export interface ResolvedTool {
  readonly tool: ToolDef;
  readonly source: ToolSource;
}
