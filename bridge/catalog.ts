import { EventEmitter } from "node:events";
import { ServiceError } from "../rpc/errors.js";
import { toolSpan } from "../rpc/tools/tool-span.js";
import {
  toolScope,
  visibleIn,
  type CallOptions,
  type ResolvedTool,
  type ToolDef,
  type ToolResult,
  type ToolScope,
  type ToolSource,
} from "../rpc/tools/types.js";
import { withinBounds } from "../rpc/tools/tool-bounds.js";

/** A log message of one source: `owner` is the tenant whose source it is (undefined: shared). */
export interface SourceLog {
  owner: string | undefined;
  /** The upstream server's name, when the message came from one. */
  source?: string;
  /** The source's name, e.g. the upstream server's; the message's own logger is appended. */
  logger: string;
  level: "debug" | "info" | "notice" | "warning" | "error" | "critical" | "alert" | "emergency";
  data: unknown;
}

/**
 * A change an upstream server announced besides its tools (MCP notifications), for the
 * sessions that see the server: `owner` and `source` as in SourceLog, `uri` the server's own.
 */
export type SourceNotice = { owner: string | undefined; source: string } & (
  | { kind: "resources/updated"; uri: string /** The sessions that subscribed to the URI. */; subscribers: string[] }
  | { kind: "resources/list_changed" }
  | { kind: "prompts/list_changed" }
);

/** Counts tool calls by outcome (rpc/metrics.ts `toolCall`). */
export interface ToolCallCounter {
  toolCall(name: string, outcome: "ok" | "tool_error" | "failed"): void;
}

/**
 * The one tool catalog behind REST (`/mcp/tools`), MCP (`tools/list`, `tools/call`) and
 * agents. Emits `changed` whenever a source is added, removed or reports new tools, so open
 * MCP sessions can be sent `notifications/tools/list_changed`.
 */
export class Catalog {
  readonly #sources = new Map<string, ToolSource>();
  readonly #events = new EventEmitter().setMaxListeners(0);
  readonly #counted?: ToolCallCounter;

  /** `counted` hears every call's outcome, whichever transport or agent made it (the metrics). */
  constructor(options: { counted?: ToolCallCounter } = {}) {
    this.#counted = options.counted;
  }

  addSource(source: ToolSource): void {
    if (this.#sources.has(source.id)) throw new Error(`Duplicate tool source: ${source.id}`);
    this.#sources.set(source.id, source);
    this.changed();
  }

  removeSource(id: string): void {
    if (this.#sources.delete(id)) this.changed();
  }

  source(id: string): ToolSource | undefined {
    return this.#sources.get(id);
  }

  /** Tells listeners the tool list changed (a source calls this when its own list changes). */
  changed(): void {
    this.#events.emit("changed");
  }

  /** A source's log message (MCP `notifications/message`), for the sessions allowed to see that source. */
  log(entry: SourceLog): void {
    this.#events.emit("log", entry);
  }

  /** An upstream server's resource or prompt notification, for the sessions allowed to see that server. */
  notice(entry: SourceNotice): void {
    this.#events.emit("notice", entry);
  }

  onNotice(listener: (entry: SourceNotice) => void): () => void {
    this.#events.on("notice", listener);
    return () => this.#events.off("notice", listener);
  }

  onLog(listener: (entry: SourceLog) => void): () => void {
    this.#events.on("log", listener);
    return () => this.#events.off("log", listener);
  }

  onChange(listener: () => void): () => void {
    this.#events.on("changed", listener);
    return () => this.#events.off("changed", listener);
  }

  /**
   * The tools one scope sees (a tenant: shared tools and its own), sorted by name; without a
   * scope every tool of every tenant, where names may repeat (counts and health only).
   */
  async list(filter: { category?: string; scope?: ToolScope } = {}): Promise<ToolDef[]> {
    const lists = await Promise.all([...this.#sources.values()].map((source) => source.list().catch(() => [] as ToolDef[])));
    const { category, scope } = filter;
    // Sources refuse oversized announcements themselves; this keeps one that slipped through
    // (a future source, a record written by an older instance) from breaking every listing.
    const tools = lists
      .flat()
      .filter((tool) => withinBounds(tool.inputSchema) && (!category || tool.category === category) && (!scope || visibleIn(tool, scope)));
    return tools.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** A tool by name within a scope; another tenant's tool is undefined like a missing one. */
  async get(name: string, scope: ToolScope): Promise<ToolDef | undefined> {
    return (await this.resolve(name, scope))?.tool;
  }

  /**
   * A tool's name resolved within a scope to its entry and the source that runs it: one
   * listing of the sources. A call resolves once and passes the resolution along (run()).
   */
  async resolve(name: string, scope: ToolScope): Promise<ResolvedTool | undefined> {
    // The first match in source order is the first of list()'s stable sort: no list, no sort.
    const sources = [...this.#sources.values()];
    const lists = await Promise.all(sources.map((source) => source.list().catch(() => [] as ToolDef[])));
    for (const [index, tools] of lists.entries()) {
      for (const tool of tools)
        if (tool.name === name && visibleIn(tool, scope) && withinBounds(tool.inputSchema)) return { tool, source: sources[index]! };
    }
    return undefined;
  }

  /**
   * Runs a tool by name in the scope of `options.tenantId`; unknown names are NOT_FOUND. Argument
   * validation happens before this. While tracing, the call is a span (`execute_tool <name>`: the
   * tool, its source kind, the tenant, the outcome; never the arguments or the result), which an
   * upstream MCP server or a VM receives as the `traceparent` of the request's `_meta`.
   */
  call(name: string, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult> {
    return toolSpan(name, options.tenantId, async () => {
      const resolved = await this.#counting(name, () => this.resolve(name, toolScope(options.tenantId)));
      if (!resolved) {
        this.#counted?.toolCall(name, "failed");
        throw new ServiceError("NOT_FOUND", `Unknown tool: ${name}`);
      }
      return this.#run(resolved, args, options);
    });
  }

  /** Runs a tool resolved by resolve() (in the scope of `options.tenantId`), as call() does after resolving. */
  run(resolved: ResolvedTool, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult> {
    return toolSpan(resolved.tool.name, options.tenantId, () => this.#run(resolved, args, options));
  }

  async #run({ tool, source }: ResolvedTool, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult> {
    return this.#counting(tool.name, async () => {
      // A resolution made in another scope is refused like an unknown tool (docs/architecture.md "Ownership").
      if (!visibleIn(tool, toolScope(options.tenantId))) throw new ServiceError("NOT_FOUND", `Unknown tool: ${tool.name}`);
      const result = await source.call(tool, args, options);
      this.#counted?.toolCall(tool.name, result.isError ? "tool_error" : "ok");
      return result;
    });
  }

  /** Counts a failure of `work` as the call's outcome. */
  async #counting<T>(name: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      this.#counted?.toolCall(name, "failed");
      throw error;
    }
  }
}
