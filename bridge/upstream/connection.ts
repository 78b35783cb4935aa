import type { IncomingMessage } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  type CreateMessageRequestSchema,
  ErrorCode,
  type LoggingLevel,
  LoggingMessageNotificationSchema,
  McpError,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { ServiceError } from "../../rpc/errors.js";
import type { Logger } from "../../rpc/log.js";
import { AddressRefused } from "../../rpc/outbound/outbound-guard.js";
import type { GuardedFetch, GuardedRequestInit } from "../../rpc/outbound/guarded-fetch.js";
import type { McpCompleteParams, McpObject, McpOffers, UpstreamServerHandle } from "../../rpc/tools/ports.js";
import type { CallOptions, ClientRequest, ToolDef, ToolResult, ToolSource } from "../../rpc/tools/types.js";
import { outgoingTraceparent } from "../../rpc/tracing.js";
import type { McpServerRecord } from "../../storage/repos/mcp-servers.js";
import type { SourceLog, SourceNotice } from "../catalog.js";
import { rpcError } from "../mcp/client-relay.js";
import { listAnnouncedTools, OutOfBounds } from "./announced-tools.js";
import { type CallInFlight, inFlight, RELAYED, StreamEnded, watchedFetch } from "./call-context.js";
import { describeError } from "./describe-error.js";
import { postToolCall } from "./direct-call.js";
import { OwnSessions, type UpstreamSessionBounds } from "./own-sessions.js";
import { type RequestBounds, ServerFeatures } from "./server-features.js";

/*
 * One upstream MCP server (docs/mcp.md "Upstream MCP servers"): its shared connection, health
 * and reconnection, its tools as a catalog source, and the requests forwarded to it. The call
 * in flight and its answer stream are in call-context.ts, the direct tools/call POST in
 * direct-call.ts, the tool listing in announced-tools.ts, the upstream sessions of client
 * sessions in own-sessions.ts, resources, prompts, completions and subscriptions in
 * server-features.ts.
 */

export type Health = "connecting" | "healthy" | "unhealthy";

export interface ConnectionSettings {
  timeoutMs: number;
  /** Extra attempts of idempotent operations (connect, tools/list); never of tools/call. */
  maxRetries: number;
  /** Called whenever this server's tool list or health changes. */
  onChange(): void;
  /** The server became healthy or unhealthy (not called while it stays so). */
  onHealth?(health: "healthy" | "unhealthy", lastError: string | null): void;
  /** Every failure that leaves the server unhealthy, with its reason (a refused token is refreshed on it). */
  onFailure?(reason: string): void;
  /** A log message the server sent (`notifications/message`). */
  onLog?(params: { level: SourceLog["level"]; logger?: string; data?: unknown }): void;
  /** A resource the gateway subscribed to was updated, or the server's resources or prompts changed. */
  onNotice?(notice: DistributiveOmit<SourceNotice, "owner" | "source">): void;
  log: Logger;
  /**
   * Every request to the server goes through this fetch: the address rule is applied to the
   * address each new socket connects to, on connect and every reconnect (docs/security.md).
   */
  fetch?: GuardedFetch;
  /**
   * The same guarded connection as `fetch`, answered with Node's own response: `tools/call`
   * goes this way once the session is established (see UpstreamConnection.call).
   */
  request?: (url: URL, init: GuardedRequestInit) => Promise<IncomingMessage>;
  /**
   * Bounds of the upstream sessions opened for client sessions (docs/mcp.md "Upstream
   * sessions"): at most `perServer` on this connection, and a user's count across servers
   * taken and given back here. Without it no client session gets one of its own.
   */
  sessions?: UpstreamSessionBounds;
}

// Reconnection of an unhealthy server: from 1 s, doubling, capped at a minute.
const RECONNECT_BASE_MS = 1000;
const RECONNECT_MAX_MS = 60_000;
const RETRY_BASE_MS = 100;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One upstream MCP server: an SDK `Client` over Streamable HTTP, its health, and its tools as
 * a catalog source. An unhealthy server lists no tools and is reconnected in the background.
 */
export class UpstreamConnection implements ToolSource, UpstreamServerHandle {
  readonly id: string;
  readonly record: McpServerRecord;
  /**
   * What every request to the server carries: the record's static headers, and the gateway's
   * own OAuth authorization at the server when it has one (bridge/upstream/authorizations.ts
   * changes it in place, so a refreshed token is used from the next request on).
   */
  readonly outgoingHeaders: Record<string, string>;
  health: Health = "connecting";
  lastError: string | undefined;
  connectedAt: string | undefined;
  #tools: ToolDef[] = [];
  #client: Client | undefined;
  #transport: StreamableHTTPClientTransport | undefined;
  /** The server's tools that declare an output schema: their results are checked by the SDK client. */
  #withOutputSchema = new Set<string>();
  #nextCallId = 0;
  #url: URL | undefined;
  #closed = false;
  #attempt: Promise<void> | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #failures = 0;
  /** Resources, prompts, completions and subscriptions at the server. */
  readonly #features: ServerFeatures;
  /** Upstream sessions of client sessions that declared client features (docs/mcp.md "Upstream sessions"). */
  readonly #own: OwnSessions;
  readonly #settings: ConnectionSettings;

  constructor(record: McpServerRecord, settings: ConnectionSettings) {
    this.record = record;
    this.outgoingHeaders = { ...record.headers };
    // One source per server and owner: two tenants may each have a server called `docs`.
    this.id = record.tenantId === null ? `mcp:${record.name}` : `mcp:${record.tenantId}/${record.name}`;
    this.#settings = settings;
    this.#own = new OwnSessions({
      name: record.name,
      url: record.url,
      headers: this.outgoingHeaders,
      timeoutMs: settings.timeoutMs,
      ...(settings.fetch ? { fetch: settings.fetch } : {}),
      log: settings.log,
      ...(settings.sessions ? { bounds: settings.sessions } : {}),
      closed: () => this.#closed,
    });
    this.#features = new ServerFeatures({
      name: record.name,
      timeoutMs: settings.timeoutMs,
      client: () => (this.health === "healthy" ? this.#client : undefined),
      offers: () => this.offers(),
      own: this.#own,
    });
  }

  get name(): string {
    return this.record.name;
  }

  get tenantId(): string | null {
    return this.record.tenantId;
  }

  offers(): McpOffers {
    const capabilities = this.health === "healthy" ? this.#client?.getServerCapabilities() : undefined;
    return {
      resources: Boolean(capabilities?.resources),
      prompts: Boolean(capabilities?.prompts),
      subscribe: Boolean(capabilities?.resources?.subscribe),
      completions: Boolean(capabilities?.completions),
    };
  }

  subscribe(uri: string, subscriber: string, options: RequestBounds): Promise<void> {
    return this.#features.subscribe(uri, subscriber, options);
  }

  unsubscribe(uri: string, subscriber: string, options: RequestBounds): Promise<void> {
    return this.#features.unsubscribe(uri, subscriber, options);
  }

  /** A session ended: its subscriptions and its own upstream session go, and the server is told about URIs nobody holds any more. */
  release(subscriber: string): void {
    this.#own.close(subscriber);
    this.#features.release(subscriber);
  }

  listResources(options: RequestBounds): Promise<McpObject[]> {
    return this.#features.listResources(options);
  }

  listResourceTemplates(options: RequestBounds): Promise<McpObject[]> {
    return this.#features.listResourceTemplates(options);
  }

  listPrompts(options: RequestBounds): Promise<McpObject[]> {
    return this.#features.listPrompts(options);
  }

  readResource(uri: string, options: RequestBounds): Promise<McpObject> {
    return this.#features.readResource(uri, options);
  }

  getPrompt(name: string, args: Record<string, string>, options: RequestBounds): Promise<McpObject> {
    return this.#features.getPrompt(name, args, options);
  }

  complete(params: McpCompleteParams, options: RequestBounds): Promise<McpObject> {
    return this.#features.complete(params, options);
  }

  get toolCount(): number {
    return this.#tools.length;
  }

  get toolNames(): string[] {
    return this.#tools.map((tool) => tool.name);
  }

  async list(): Promise<ToolDef[]> {
    return this.health === "healthy" ? this.#tools : [];
  }

  /** Connects (with retries) unless an attempt is already running; resolves when it settles. */
  connect(): Promise<void> {
    this.#attempt ??= inFlight
      .exit(() => this.#connectWithRetries())
      .finally(() => {
        this.#attempt = undefined;
      });
    return this.#attempt;
  }

  async #connectWithRetries(): Promise<void> {
    clearTimeout(this.#reconnectTimer);
    for (let attempt = 0; attempt <= this.#settings.maxRetries && !this.#closed; attempt += 1) {
      if (attempt > 0) await sleep(RETRY_BASE_MS * 2 ** (attempt - 1));
      try {
        await this.#connectOnce();
        this.#failures = 0;
        return;
      } catch (error) {
        this.lastError = describeError(error, this.#settings.timeoutMs);
        // The address rule will refuse again at once: no quick retries, only the slow reconnect.
        if (error instanceof AddressRefused || error instanceof OutOfBounds) break;
      }
    }
    if (this.#closed) return;
    this.#markUnhealthy(this.lastError ?? "connection failed");
  }

  async #connectOnce(): Promise<void> {
    await this.#dropClient();
    // The client features are declared so the server may ask them during a call; each request
    // is relayed to the session that made the call, which must have declared the same.
    const client = new Client(
      { name: "chat-agent-tool-gateway", version: "0.1.0" },
      { capabilities: { sampling: { tools: {} }, elicitation: { form: {}, url: {} }, roots: {} } },
    );
    const transport = new StreamableHTTPClientTransport(new URL(this.record.url), {
      requestInit: { headers: this.outgoingHeaders },
      fetch: watchedFetch(this.#settings.fetch ?? fetch),
    });
    for (const [schema, method] of RELAYED) {
      client.setRequestHandler(
        schema as typeof CreateMessageRequestSchema,
        (request, extra) => this.#relay({ method, params: request.params as Record<string, unknown> }, extra.signal) as never,
      );
    }
    client.onerror = () => undefined;
    client.onclose = () => {
      if (this.#client === client && !this.#closed) this.#markUnhealthy("connection closed");
    };
    // MCP: a server with tools.listChanged tells us when to list again.
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      this.refresh().catch(() => undefined);
    });
    // Relayed to the sessions that see this server, each filtered by its own logging/setLevel.
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
      this.#settings.onLog?.(notification.params);
    });
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
      const subscribers = this.#features.subscribersOf(notification.params.uri);
      if (subscribers.length) this.#settings.onNotice?.({ kind: "resources/updated", uri: notification.params.uri, subscribers });
    });
    client.setNotificationHandler(ResourceListChangedNotificationSchema, () =>
      this.#settings.onNotice?.({ kind: "resources/list_changed" }),
    );
    client.setNotificationHandler(PromptListChangedNotificationSchema, () => this.#settings.onNotice?.({ kind: "prompts/list_changed" }));
    this.#client = client;
    this.#transport = transport;
    try {
      await client.connect(transport, { timeout: this.#settings.timeoutMs });
      // A new connection is a new upstream session: subscriptions held through the old one are renewed.
      if (client.getServerCapabilities()?.resources?.subscribe) {
        await Promise.all(
          this.#features
            .subscribed()
            .map((uri) => client.subscribeResource({ uri }, { timeout: this.#settings.timeoutMs }).catch(() => undefined)),
        );
      }
      // Everything the server logs comes here; each client session filters by its own level.
      if (client.getServerCapabilities()?.logging)
        await client.setLoggingLevel("debug", { timeout: this.#settings.timeoutMs }).catch(() => undefined);
      this.#tools = await this.#listTools(client);
    } catch (error) {
      if (this.#client === client) this.#client = undefined;
      await client.close().catch(() => undefined);
      throw error;
    }
    if (this.#closed) {
      await client.close().catch(() => undefined);
      return;
    }
    const was = this.health;
    this.health = "healthy";
    this.lastError = undefined;
    this.connectedAt = new Date().toISOString();
    this.#settings.onChange();
    if (was !== "healthy") this.#settings.onHealth?.("healthy", null);
  }

  async #listTools(client: Client): Promise<ToolDef[]> {
    const { tools, withOutputSchema } = await listAnnouncedTools(client, this.record, this.id, this.#settings.timeoutMs);
    this.#withOutputSchema = withOutputSchema;
    return tools;
  }

  /** Lists the tools again (after `notifications/tools/list_changed`), with retries. */
  async refresh(): Promise<void> {
    const client = this.#client;
    if (!client || this.health !== "healthy") return;
    let lastError: unknown;
    for (let attempt = 0; attempt <= this.#settings.maxRetries; attempt += 1) {
      if (attempt > 0) await sleep(RETRY_BASE_MS * 2 ** (attempt - 1));
      try {
        this.#tools = await this.#listTools(client);
        this.#settings.onChange();
        return;
      } catch (error) {
        lastError = error;
        if (error instanceof OutOfBounds) break;
      }
    }
    this.#markUnhealthy(describeError(lastError, this.#settings.timeoutMs));
  }

  /** Forwards `tools/call` once: a call may have side effects, so it is never retried. */
  async call(tool: ToolDef, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult> {
    const { name } = tool;
    // The server's own name for the tool, as listed (the catalog name is `<server>__<tool>`).
    const remote = tool.source.tool;
    if (tool.source.id !== this.id || remote === undefined) throw new ServiceError("NOT_FOUND", `Unknown tool: ${name}`);
    if (!this.#client || this.health !== "healthy")
      throw new ServiceError("UNAVAILABLE", `MCP server ${this.record.name} is not connected`);
    // A client session with client features calls on its own upstream session (docs/mcp.md "Upstream sessions").
    const own = await this.#own.current();
    const client = own?.client ?? this.#client;
    if (!client) throw new ServiceError("UNAVAILABLE", `MCP server ${this.record.name} is not connected`);
    // Ends the call at once when the server's answer stream ends without the reply.
    // One signal for the SDK: the caller's abort or the stream's end. The listener on the
    // caller's signal (which may be long-lived) is removed when the call settles.
    const ended = new AbortController();
    const signal = ended.signal;
    const onAbort = () => ended.abort(options.signal!.reason);
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener("abort", onAbort, { once: true });
    const call: CallInFlight = {
      relay: options.relay,
      done: false,
      posted: false,
      streamEnded: () => {
        if (!call.done) ended.abort(new Error("the server ended the call's stream without an answer"));
      },
    };
    try {
      // The SDK client puts its own progressToken in `_meta` when asked for progress, and
      // tells the server `notifications/cancelled` when the signal aborts.
      const { onProgress } = options;
      const transport = own?.transport ?? this.#transport;
      const request = this.#settings.request;
      // The common call (no progress asked, no output schema to check, the session established)
      // is sent as one JSON-RPC POST and its answer read here: the SDK transport's Web fetch
      // and stream pipeline cost several times more (docs/benchmarks-bridge.md "MCP proxy").
      if (!onProgress && request && transport?.sessionId !== undefined && (own !== undefined || !this.#withOutputSchema.has(remote))) {
        return await postToolCall({
          client,
          transport,
          request,
          url: (this.#url ??= new URL(this.record.url)),
          headers: this.outgoingHeaders,
          // Ids of their own, so they never meet the SDK client's numeric ones.
          id: `gw-${(this.#nextCallId += 1)}`,
          tool: remote,
          args,
          timeoutMs: options.timeoutMs,
          signal,
          call,
        });
      }
      const traceparent = outgoingTraceparent();
      const result = await inFlight.run(call, () =>
        client.callTool({ name: remote, arguments: args, ...(traceparent ? { _meta: { traceparent } } : {}) }, undefined, {
          timeout: options.timeoutMs,
          signal,
          ...(onProgress
            ? {
                onprogress: ({ progress, total, message }) =>
                  onProgress({ progress, ...(total === undefined ? {} : { total }), ...(message === undefined ? {} : { message }) }),
              }
            : {}),
        }),
      );
      return result as ToolResult;
    } catch (error) {
      if (options.signal?.aborted) throw new ServiceError("TIMEOUT", `Call to ${name} was cancelled`);
      // The answer stream ended without the reply: on the SDK path reported through `ended`
      // (watchedFetch), on the direct path thrown by postToolCall (direct-call.ts).
      if (ended.signal.aborted || error instanceof StreamEnded)
        throw new ServiceError("BAD_GATEWAY", `MCP server ${this.record.name} ended the call to ${name} without an answer`);
      if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
        throw new ServiceError(
          "TIMEOUT",
          `MCP server ${this.record.name} did not answer ${name} within ${Math.round(options.timeoutMs / 1000)} s`,
        );
      }
      if (error instanceof McpError) {
        // The server answered with a JSON-RPC error: relay its message, it is about the call.
        throw new ServiceError("BAD_GATEWAY", `MCP server ${this.record.name} refused ${name}: ${error.message}`, {
          details: { upstreamCode: error.code },
        });
      }
      // Transport failure of a client's own upstream session: it ends (the next request opens
      // another); the shared connection finds out on its own whether the server is gone.
      if (own) {
        this.#own.close(own.owner.id);
        throw new ServiceError("BAD_GATEWAY", `MCP server ${this.record.name} is unreachable: ${describeError(error, options.timeoutMs)}`);
      }
      // Transport failure: the server is gone; stop listing its tools and reconnect.
      this.#markUnhealthy(describeError(error, options.timeoutMs));
      throw new ServiceError("BAD_GATEWAY", `MCP server ${this.record.name} is unreachable: ${this.lastError}`);
    } finally {
      call.done = true;
      options.signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Upstream sessions open for client sessions on this connection (tests, metrics). */
  get ownSessions(): number {
    return this.#own.size;
  }

  /** The client changed its roots: its upstream session here is told (`notifications/roots/list_changed`). */
  rootsChanged(id: string): void {
    this.#own.rootsChanged(id);
  }

  /** The client set its log level: forwarded to its upstream session here, if the server logs. */
  setLevel(id: string, level: LoggingLevel): Promise<void> {
    return this.#own.setLevel(id, level);
  }

  /** A server-to-client request: relayed to the client session of the call it arrived with, or refused. */
  async #relay(request: ClientRequest, signal: AbortSignal): Promise<Record<string, unknown>> {
    const call = inFlight.getStore();
    if (!call || call.done) {
      throw rpcError(
        ErrorCode.MethodNotFound,
        `${request.method} is relayed only during a tools/call, to the MCP client session that made it; the gateway's connection is shared by every session`,
      );
    }
    if (!call.relay)
      throw rpcError(
        ErrorCode.MethodNotFound,
        `${request.method} refused: this call did not come from an MCP client session (REST or an agent)`,
      );
    return call.relay(request, { signal, timeoutMs: this.#settings.timeoutMs });
  }

  #markUnhealthy(reason: string): void {
    const wasListing = this.health === "healthy" && this.#tools.length > 0;
    const was = this.health;
    this.health = "unhealthy";
    this.lastError = reason;
    this.#tools = [];
    void this.#dropClient();
    if (wasListing || this.#failures === 0) this.#settings.onChange();
    if (was !== "unhealthy") this.#settings.onHealth?.("unhealthy", reason);
    this.#settings.onFailure?.(reason);
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#closed) return;
    clearTimeout(this.#reconnectTimer);
    const delay = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** this.#failures);
    this.#failures += 1;
    // Outside any call's context: a reconnection is nobody's call (see inFlight).
    this.#reconnectTimer = setTimeout(() => inFlight.exit(() => void this.connect()), delay);
    // A pending reconnection must never keep the process alive.
    this.#reconnectTimer.unref();
  }

  async #dropClient(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    this.#transport = undefined;
    if (client) await client.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#reconnectTimer);
    this.#own.closeAll();
    this.#tools = [];
    await this.#dropClient();
  }
}
