import type { CallOptions, JsonSchema, ResolvedTool, ToolDef, ToolResult, ToolScope } from "./types.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import type { ResolveHost } from "../outbound/outbound-guard.js";
import type { Store } from "../../storage/store.js";
import type { SecretBox } from "../../storage/secret-box.js";

/**
 * What the rpc domains need of the tool bridge, as interfaces (the tools and agents modules
 * take them in `init`). The bridge (bridge/) implements them; only the composition root wires the two
 * together, so no rpc file imports bridge/ (docs/architecture.md).
 */

/** The one tool catalog behind REST, MCP and agents. */
export interface ToolCatalog {
  /** The tools of one scope (rpc/tools/types.ts ToolScope); without a scope every tool (counts, health). */
  list(filter?: { category?: string; scope?: ToolScope }): Promise<ToolDef[]>;
  /** A tool by its name within a scope. */
  get(name: string, scope: ToolScope): Promise<ToolDef | undefined>;
  /** A tool's name resolved within a scope to its entry and source (one listing); undefined for unknown names and other tenants' tools. */
  resolve(name: string, scope: ToolScope): Promise<ResolvedTool | undefined>;
  /** Runs a resolved tool: no lookup of its name again. */
  run(resolved: ResolvedTool, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult>;
  /** Resolves and runs a tool by name within the scope of `options.tenantId`; unknown names (and other tenants' tools) are NOT_FOUND. */
  call(name: string, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult>;
  /** Subscribes to "the tool list changed"; returns the unsubscribe function. */
  onChange(listener: () => void): () => void;
}

/** A tool a VM agent announced. */
export interface VmToolInfo {
  name: string;
  description: string;
  inputSchema: JsonSchema;
  category?: string;
}

/** Who a VM socket serves once admitted (docs/vm-agents.md). */
export interface VmIdentity {
  vmId: string;
  agentId: string;
  tenantId: string;
  /** The user whose credential opened the socket ("service" for PLATFORM_SERVICE_KEY). */
  userId: string;
  /**
   * The socket's connection, chosen when the gate admits it: the token of the place it holds
   * in its tenant's VM socket quota (docs/quotas.md).
   */
  connectionId?: string;
}

/** A resource a VM agent announced (MCP Resource fields). */
export interface VmResourceInfo {
  uri: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
}

/** A prompt a VM agent announced (MCP Prompt fields). */
export interface VmPromptInfo {
  name: string;
  title?: string;
  description?: string;
  arguments?: { name: string; description?: string; required?: boolean }[];
}

/** A connected VM agent, on this instance or another (STORAGE=redis). */
export interface VmPresence extends VmIdentity {
  instanceId: string;
  connectionId: string;
  connectedAt: string;
  tools: VmToolInfo[];
  /** Announced with its tools; absent from agents that announce none. */
  resources?: VmResourceInfo[];
  prompts?: VmPromptInfo[];
}

/** Connected VM agents across instances. */
export interface VmDirectory {
  /**
   * Decides whether a socket for this identity may open: the first tenant to connect a vmId
   * owns it (403 otherwise), and the tenant has a place among its VM sockets (409 past
   * QUOTA_VM_SOCKETS_PER_TENANT). The identity to open the socket with (its `connectionId`).
   */
  admit(identity: VmIdentity): Promise<VmIdentity>;
  list(): Promise<VmPresence[]>;
  find(vmId: string): Promise<VmPresence | undefined>;
  /** Calls a tool on a VM wherever it is connected; UNAVAILABLE when none is. */
  call(
    vmId: string,
    tool: string,
    args: Record<string, unknown>,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<ToolResult>;
  /** `resources/read` or `prompts/get` on a VM wherever it is connected; the VM's own names; its answer as it sent it. */
  ask(
    vmId: string,
    method: VmAskMethod,
    params: Record<string, unknown>,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<McpObject>;
  /** Sockets of this instance, and calls waiting on them. */
  stats(): { connected: number; inFlight: number };
}

/** What the bridge asks a VM besides tools/call. */
export type VmAskMethod = "resources/read" | "prompts/get";

export type UpstreamHealth = "connecting" | "healthy" | "unhealthy";

/** A registered upstream MCP server as every endpoint shows it. */
export interface UpstreamServerView {
  name: string;
  url: string;
  category: string;
  /** Names of the headers sent upstream; values are secrets, encrypted at rest and never shown. */
  headers: string[];
  /** Registered by an operator for every tenant (`npm run admin -- add-mcp-server`); tenants cannot delete it. */
  shared: boolean;
  health: UpstreamHealth;
  lastError: string | null;
  toolCount: number;
  tools: string[];
  connectedAt: string | null;
  createdAt: string;
}

export interface UpstreamRegisterInput {
  name: string;
  url: string;
  headers: Record<string, string>;
  category: string;
  createdBy: string;
  /** The owning tenant: only its members list the server, see its tools, call or delete it. */
  tenantId: string;
}

/** Health for the public /bridge/health: shared servers by name, tenants' servers only counted. */
export interface UpstreamSummary {
  shared: { name: string; health: UpstreamHealth; toolCount: number; lastError: string | null }[];
  tenants: { total: number; healthy: number; unhealthy: number };
}

/** An MCP object as a server sent it (a resource, template, prompt, or a result), passed through. */
export type McpObject = Record<string, unknown>;

/**
 * One connected upstream server as the MCP endpoint federates it: what it offers besides tools,
 * forwarded live (never cached). Names and URIs here are the server's own; the rpc methods
 * namespace them (docs/mcp.md "Resources and prompts").
 */
export interface UpstreamServerHandle {
  readonly name: string;
  /**
   * How the endpoint names this source's items, when not as an upstream server's
   * (`<name>+<uri>`, `<name>__<prompt>`, `_meta.server`): a VM's are `vm+<vmId>+<uri>`,
   * `vm__<vmId>__<prompt>`, `_meta.vm`.
   */
  readonly namespace?: { uri: string; prompt: string; meta: Record<string, unknown> };
  /** Owning tenant; null for a server operators shared. */
  readonly tenantId: string | null;
  /** What the server declared at initialize; nothing while it is not healthy. */
  offers(): McpOffers;
  /** Every page of resources/list (bounded). */
  listResources(options: { timeoutMs: number; signal?: AbortSignal }): Promise<McpObject[]>;
  listResourceTemplates(options: { timeoutMs: number; signal?: AbortSignal }): Promise<McpObject[]>;
  readResource(uri: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<McpObject>;
  listPrompts(options: { timeoutMs: number; signal?: AbortSignal }): Promise<McpObject[]>;
  getPrompt(name: string, args: Record<string, string>, options: { timeoutMs: number; signal?: AbortSignal }): Promise<McpObject>;
  /**
   * `resources/subscribe` for `subscriber` (an MCP session): the server is asked once per URI,
   * however many sessions subscribe; its `notifications/resources/updated` name the subscribers.
   */
  subscribe(uri: string, subscriber: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<void>;
  /** `resources/unsubscribe`: the server is told when the last subscriber of the URI leaves. */
  unsubscribe(uri: string, subscriber: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<void>;
  /** `completion/complete` with the server's own ref (prompt name or URI template). */
  complete(params: McpCompleteParams, options: { timeoutMs: number; signal?: AbortSignal }): Promise<McpObject>;
}

/** What an upstream server declared at initialize besides tools. */
export interface McpOffers {
  resources: boolean;
  prompts: boolean;
  /** `resources.subscribe`: the server sends `notifications/resources/updated` for subscribed URIs. */
  subscribe: boolean;
  completions: boolean;
}

/** The params of MCP `completion/complete`. */
export interface McpCompleteParams {
  ref: { type: "ref/prompt"; name: string } | { type: "ref/resource"; uri: string };
  argument: { name: string; value: string };
  context?: { arguments?: Record<string, string> };
}

/**
 * The registered upstream MCP servers. A tenant's server is invisible to every other tenant:
 * each method answers for another tenant's name exactly as for a missing one.
 */
export interface UpstreamRegistry {
  register(input: UpstreamRegisterInput): Promise<UpstreamServerView>;
  /** NOT_FOUND for a name the tenant does not have; FORBIDDEN for a shared server. */
  remove(tenantId: string, name: string): Promise<void>;
  /** The tenant's servers and the shared ones. */
  list(tenantId: string): Promise<UpstreamServerView[]>;
  /** Health of this instance's connections, for /bridge/health. */
  summary(): UpstreamSummary;
  /**
   * The server `name` as `scope` sees it (a tenant: its own or a shared one; internal services:
   * shared ones), whatever its health; undefined for another tenant's name exactly as for a missing one.
   */
  find(scope: ToolScope, name: string): UpstreamServerHandle | undefined;
  /** Every server `scope` sees, sorted by name (resources and prompts federation). */
  visible(scope: ToolScope): UpstreamServerHandle[];
}

/** The bridge as the rpc domains see it; `close` runs at shutdown. */
export interface ToolBridgePorts {
  catalog: ToolCatalog;
  vms: VmDirectory;
  upstream: UpstreamRegistry;
  close(): Promise<void>;
}

declare module "../ports.js" {
  interface DomainExports {
    /** The tool bridge's ports, wired in by the composition root (rpc/compose.ts) before any module. */
    bridge: ToolBridgePorts;
  }
}

/** Publishes one of the service's own events under a tenant (rpc/event-sink.ts); never fails. */
export type EmitEvent = (tenantId: string | undefined, type: string, data: Record<string, unknown>) => void;

/** What the composition root hands the tool bridge when it opens it (rpc/compose.ts). */
export interface ToolBridgeInfra {
  config: Config;
  log: Logger;
  store: Store;
  secrets: SecretBox;
  resolveHost: ResolveHost;
  emit: EmitEvent;
  /** Counts every catalog call by source and outcome. */
  metrics: Pick<Metrics, "toolCall">;
}

/** Opens the tool bridge over the service's storage; the composition root passes the real one. */
export type OpenToolBridge = (infra: ToolBridgeInfra) => Promise<ToolBridgePorts>;
