import { outgoingTraceparent } from "../../rpc/tracing.js";
import { AsyncLocalStorage } from "node:async_hooks";
import type { IncomingMessage } from "node:http";
import { setMaxListeners } from "node:events";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  McpError,
  LoggingMessageNotificationSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type LoggingLevel,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { ServiceError } from "../../rpc/errors.js";
import type { Logger } from "../../rpc/log.js";
import type { McpServerRecord } from "../../storage/repos/mcp-servers.js";
import type { CallOptions, ClientRelay, ClientRequest, ToolDef, ToolResult, ToolSource } from "../../rpc/tools/types.js";
import type { McpCompleteParams, McpObject, McpOffers, UpstreamServerHandle } from "../../rpc/tools/ports.js";
import { NAMESPACE_SEPARATOR } from "../../rpc/tools/sources.js";
import { AddressRefused } from "../../rpc/outbound/outbound-guard.js";
import type { GuardedFetch, GuardedRequestInit } from "../../rpc/outbound/guarded-fetch.js";
import { announcementProblem, TOOL_BOUNDS } from "../../rpc/tools/tool-bounds.js";
import type { SourceLog, SourceNotice } from "../catalog.js";
import { rpcError } from "../mcp/client-relay.js";
import { readSseData } from "../../rpc/sse-parse.js";
import { isObject } from "../../rpc/validate.js";
import { clientSession, type ClientSessionLink } from "./client-session.js";

/** A call's answer (JSON or SSE) ended without its reply. */
class StreamEnded extends Error {
  override name = "StreamEnded";
}

/** An announcement outside the bounds (docs/security.md "Input bounds"): the server is marked unhealthy with it. */
class OutOfBounds extends Error {
  override name = "OutOfBounds";
}

export type Health = "connecting" | "healthy" | "unhealthy";

type RequestBounds = { timeoutMs: number; signal?: AbortSignal };

/** The SDK's request options for our bounds (its option is `timeout`). */
const sdkOptions = (bounds: RequestBounds) => ({ timeout: bounds.timeoutMs, ...(bounds.signal ? { signal: bounds.signal } : {}) });

/** Separator between a server's name and its tool's name; server names never contain `_`. */

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

export interface UpstreamSessionBounds {
  perServer: number;
  /** Counts one more upstream session of `userId`; false past MCP_UPSTREAM_SESSIONS_PER_USER. */
  take(userId: string): boolean;
  give(userId: string): void;
}

/** An SDK client and its transport: the shared connection's, or one client session's own. */
interface Link {
  client: Client;
  transport: StreamableHTTPClientTransport;
}

/** An upstream session opened for one client session (docs/mcp.md "Upstream sessions"). */
interface OwnSession extends Link {
  owner: ClientSessionLink;
}

// Reconnection of an unhealthy server: from 1 s, doubling, capped at a minute.
const RECONNECT_BASE_MS = 1000;
const RECONNECT_MAX_MS = 60_000;
const RETRY_BASE_MS = 100;
const MAX_PAGES = 50;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The `tools/call` being sent, in the async context of the SDK client's work for it. One
 * connection serves every client session, and the SDK does not say which request a
 * server-to-client request relates to; but the client reads a call's SSE answer in the async
 * context the call was sent from, so a request arriving on that stream finds its call here.
 * Requests on the server's GET stream (unrelated to any call) find none.
 */
interface CallInFlight {
  relay: ClientRelay | undefined;
  /** The call settled: its relay is closed. */
  done: boolean;
  /** The first POST of the context (the tools/call itself) was sent. */
  posted: boolean;
  /** The call's SSE answer ended (or broke) without a reply and without a resumption id. */
  streamEnded(): void;
}
const inFlight = new AsyncLocalStorage<CallInFlight>();

/** Resumptions of one call's SSE answer (a server that closes it to be polled, SEP-1699). */
const MAX_RESUMES = 5;

/**
 * Passes an SSE body through unchanged, noting the last `id:` field it carried in `last`
 * (the event to resume after).
 */
async function* eventIds(body: AsyncIterable<Uint8Array | string>, last: { value: string | undefined }): AsyncGenerator<Uint8Array> {
  let partial = "";
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk;
    const lines = (partial + decoder.decode(bytes, { stream: true })).split(/\r\n|\r|\n/);
    partial = lines.pop() ?? "";
    for (const line of lines) if (line.startsWith("id:")) last.value = line.slice(3).trimStart();
    yield bytes;
  }
}

/** How long after a call's answer stream ended without its reply the call fails. */
const STREAM_END_GRACE_MS = 100;

/** Server-to-client requests the gateway relays (docs/mcp.md "Requests of upstream servers"). */
const RELAYED = [
  [CreateMessageRequestSchema, "sampling/createMessage"],
  [ElicitRequestSchema, "elicitation/create"],
  [ListRootsRequestSchema, "roots/list"],
] as const;

/**
 * A call's POST answered with an SSE stream is watched: when the stream ends or breaks before
 * the reply, the call fails at once instead of at its timeout (a server that crashed, or closed
 * the stream). A stream carrying SSE ids may be resumed by the SDK, so it is left alone.
 */
function watchedFetch(base: GuardedFetch | typeof fetch): GuardedFetch {
  return (async (url: Parameters<typeof fetch>[0], init?: RequestInit) => {
    // The SDK transport passes its one AbortSignal with every request: more than 10 calls in
    // flight would otherwise warn of a listener leak that is none (each request removes its own).
    if (init?.signal) setMaxListeners(0, init.signal);
    const call = inFlight.getStore();
    const watch = call !== undefined && !call.posted && init?.method === "POST";
    if (watch) call.posted = true;
    const response = await (base as typeof fetch)(url, init);
    if (!watch || !response.body || !(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) return response;
    let resumable = false;
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    // The SDK parses what was read a moment later: the end is reported after a short grace, so a
    // reply in the last chunk settles the call first.
    const ended = () => {
      if (!resumable) setTimeout(() => call.streamEnded(), STREAM_END_GRACE_MS).unref();
    };
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            ended();
            controller.close();
            return;
          }
          if (!resumable && /(^|\n)id:/.test(decoder.decode(value, { stream: true }))) resumable = true;
          controller.enqueue(value);
        } catch (error) {
          ended();
          controller.error(error);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  }) as GuardedFetch;
}

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
  /** Subscribed URIs (the server's own) and the sessions that subscribed to each. */
  readonly #subscribers = new Map<string, Set<string>>();
  /** Upstream sessions of client sessions that declared client features, by client session id (undefined: refused or failed, the shared connection serves it). */
  readonly #own = new Map<string, Promise<OwnSession | undefined>>();
  /** Client sessions refused one (a bound was reached): the shared connection serves them. */
  readonly #refused = new Set<string>();
  readonly #settings: ConnectionSettings;

  constructor(record: McpServerRecord, settings: ConnectionSettings) {
    this.record = record;
    this.outgoingHeaders = { ...record.headers };
    // One source per server and owner: two tenants may each have a server called `docs`.
    this.id = record.tenantId === null ? `mcp:${record.name}` : `mcp:${record.tenantId}/${record.name}`;
    this.#settings = settings;
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

  async subscribe(uri: string, subscriber: string, options: RequestBounds): Promise<void> {
    if (this.#subscribers.get(uri)?.has(subscriber)) return;
    if (!this.offers().subscribe) throw new ServiceError("NOT_FOUND", `MCP server ${this.record.name} offers no resource subscriptions`);
    // The server is asked once per URI; it may be asked twice when two sessions race (harmless).
    if (!this.#subscribers.get(uri)?.size)
      await this.#forward("resources", `subscription to ${uri}`, options, (client) =>
        client.subscribeResource({ uri }, sdkOptions(options)),
      );
    let subscribers = this.#subscribers.get(uri);
    if (!subscribers) this.#subscribers.set(uri, (subscribers = new Set()));
    subscribers.add(subscriber);
  }

  async unsubscribe(uri: string, subscriber: string, options: RequestBounds): Promise<void> {
    const subscribers = this.#subscribers.get(uri);
    if (!subscribers?.delete(subscriber) || subscribers.size > 0) return;
    this.#subscribers.delete(uri);
    await this.#forward("resources", `unsubscription from ${uri}`, options, (client) =>
      client.unsubscribeResource({ uri }, sdkOptions(options)),
    ).catch(() => undefined);
  }

  /** A session ended: its subscriptions and its own upstream session go, and the server is told about URIs nobody holds any more. */
  release(subscriber: string): void {
    this.#closeOwn(subscriber);
    for (const uri of [...this.#subscribers.keys()]) void this.unsubscribe(uri, subscriber, { timeoutMs: this.#settings.timeoutMs });
  }

  listResources(options: RequestBounds): Promise<McpObject[]> {
    return this.#allPages(
      "resources",
      (client, cursor) => client.listResources(cursor ? { cursor } : {}, sdkOptions(options)),
      (page) => page.resources,
    );
  }

  listResourceTemplates(options: RequestBounds): Promise<McpObject[]> {
    return this.#allPages(
      "resources",
      (client, cursor) => client.listResourceTemplates(cursor ? { cursor } : {}, sdkOptions(options)),
      (page) => page.resourceTemplates,
    );
  }

  listPrompts(options: RequestBounds): Promise<McpObject[]> {
    return this.#allPages(
      "prompts",
      (client, cursor) => client.listPrompts(cursor ? { cursor } : {}, sdkOptions(options)),
      (page) => page.prompts,
    );
  }

  // Read, get and complete go on the client session's own upstream session when it has one
  // (the server may ask that client something while answering); lists and subscriptions stay
  // on the shared connection.
  readResource(uri: string, options: RequestBounds): Promise<McpObject> {
    return this.#forward("resources", `resource ${uri}`, options, (client) => client.readResource({ uri }, sdkOptions(options)), true);
  }

  getPrompt(name: string, args: Record<string, string>, options: RequestBounds): Promise<McpObject> {
    return this.#forward(
      "prompts",
      `prompt ${name}`,
      options,
      (client) => client.getPrompt({ name, arguments: args }, sdkOptions(options)),
      true,
    );
  }

  complete(params: McpCompleteParams, options: RequestBounds): Promise<McpObject> {
    const what = params.ref.type === "ref/prompt" ? `completion of prompt ${params.ref.name}` : `completion of ${params.ref.uri}`;
    return this.#forward("completions", what, options, (client) => client.complete(params, sdkOptions(options)), true);
  }

  /** Every page of a list (at most MAX_PAGES); a server that does not offer `capability` lists nothing. */
  async #allPages<P extends { nextCursor?: string }>(
    capability: "resources" | "prompts",
    fetchPage: (client: Client, cursor: string | undefined) => Promise<P>,
    items: (page: P) => McpObject[],
  ): Promise<McpObject[]> {
    if (!this.offers()[capability]) return [];
    const all: McpObject[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page += 1) {
      const result = await this.#forward(capability, `${capability}/list`, undefined, (client) => fetchPage(client, cursor));
      all.push(...items(result));
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    return all;
  }

  /** One request to the server, its failures as the catalog's errors (like tools/call, never retried). */
  async #forward<T>(
    capability: keyof McpOffers,
    what: string,
    options: RequestBounds | undefined,
    send: (client: Client) => Promise<T>,
    own = false,
  ): Promise<T> {
    if (!this.#client || this.health !== "healthy")
      throw new ServiceError("UNAVAILABLE", `MCP server ${this.record.name} is not connected`);
    if (!this.offers()[capability]) throw new ServiceError("NOT_FOUND", `MCP server ${this.record.name} offers no ${capability}`);
    const session = own ? await this.#ownSession() : undefined;
    const client = session?.client ?? this.#client;
    if (!client) throw new ServiceError("UNAVAILABLE", `MCP server ${this.record.name} is not connected`);
    try {
      return await send(client);
    } catch (error) {
      if (session && !(error instanceof McpError) && !options?.signal?.aborted) this.#closeOwn(session.owner.id);
      if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
        throw new ServiceError(
          "TIMEOUT",
          `MCP server ${this.record.name} did not answer ${what} within ${Math.round(this.#settings.timeoutMs / 1000)} s`,
        );
      }
      if (error instanceof McpError)
        throw new ServiceError("BAD_GATEWAY", `MCP server ${this.record.name} refused ${what}: ${error.message}`, {
          details: { upstreamCode: error.code },
        });
      if (options?.signal?.aborted) throw new ServiceError("TIMEOUT", `Request for ${what} was cancelled`);
      throw new ServiceError(
        "BAD_GATEWAY",
        `MCP server ${this.record.name} is unreachable: ${describeError(error, this.#settings.timeoutMs)}`,
      );
    }
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
      const subscribers = this.#subscribers.get(notification.params.uri);
      if (subscribers?.size)
        this.#settings.onNotice?.({ kind: "resources/updated", uri: notification.params.uri, subscribers: [...subscribers] });
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
          [...this.#subscribers.keys()].map((uri) =>
            client.subscribeResource({ uri }, { timeout: this.#settings.timeoutMs }).catch(() => undefined),
          ),
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
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page += 1) {
      const result = await client.listTools(cursor ? { cursor } : {}, { timeout: this.#settings.timeoutMs });
      tools.push(...result.tools);
      // Stop paging as soon as the count is out of bounds: no need to read the rest.
      if (tools.length > TOOL_BOUNDS.maxToolsPerSource) break;
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    const problem = announcementProblem(tools);
    this.#withOutputSchema = new Set(tools.filter((tool) => tool.outputSchema !== undefined).map((tool) => tool.name));
    if (problem) throw new OutOfBounds(`MCP server ${this.record.name} ${problem.startsWith("tool ") ? "announced " : ""}${problem}`);
    return tools.map((tool) => ({
      name: `${this.record.name}${NAMESPACE_SEPARATOR}${tool.name}`,
      description: tool.description ?? tool.title ?? "",
      inputSchema: tool.inputSchema as Record<string, unknown>,
      category: this.record.category,
      source: { kind: "mcp", id: this.id, server: this.record.name, tool: tool.name },
      ...(this.record.tenantId === null ? {} : { owner: this.record.tenantId }),
    }));
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
    const own = await this.#ownSession();
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
      if (
        !onProgress &&
        request &&
        transport?.sessionId !== undefined &&
        (own !== undefined || !this.#withOutputSchema.has(remote))
      ) {
        return await this.#post(client, transport, request, remote, args, options.timeoutMs, signal, call);
      }
      const traceparent = outgoingTraceparent();
      const result = await inFlight.run(call, () =>
        client.callTool(
          { name: remote, arguments: args, ...(traceparent ? { _meta: { traceparent } } : {}) },
          undefined,
          {
            timeout: options.timeoutMs,
            signal,
            ...(onProgress
              ? {
                  onprogress: ({ progress, total, message }) =>
                    onProgress({ progress, ...(total === undefined ? {} : { total }), ...(message === undefined ? {} : { message }) }),
                }
              : {}),
          },
        ),
      );
      return result as ToolResult;
    } catch (error) {
      if (options.signal?.aborted) throw new ServiceError("TIMEOUT", `Call to ${name} was cancelled`);
      // The answer stream ended without the reply: on the SDK path reported through `ended`
      // (watchedFetch), on the direct path thrown by #post.
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
        this.#closeOwn(own.owner.id);
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

  /**
   * One `tools/call` as a plain JSON-RPC POST in the SDK client's session (its id and protocol
   * version, the record's headers), the answer read as JSON or as an SSE stream. Everything on
   * the stream besides the reply — the server's requests (sampling, elicitation, roots), log
   * messages — is handed to the SDK client as if its transport had read it, in the call's
   * context, so relays and notifications work as on the SDK's own path. Cancellation and the
   * timeout tell the server `notifications/cancelled` like the SDK does; a stream that ends
   * without the reply fails the call at once. Errors are thrown as the SDK would (McpError for
   * a JSON-RPC error or the timeout), for call() to map.
   */
  async #post(
    client: Client,
    transport: StreamableHTTPClientTransport,
    request: NonNullable<ConnectionSettings["request"]>,
    tool: string,
    args: Record<string, unknown>,
    timeoutMs: number,
    signal: AbortSignal,
    call: CallInFlight,
  ): Promise<ToolResult> {
    // Ids of their own, so they never meet the SDK client's numeric ones.
    const id = `gw-${(this.#nextCallId += 1)}`;
    const abort = new AbortController();
    let timedOut = false;
    const cancel = (reason: string) => {
      if (abort.signal.aborted) return;
      abort.abort();
      void client.notification({ method: "notifications/cancelled", params: { requestId: id, reason } }).catch(() => undefined);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      cancel(`Request timed out after ${timeoutMs} ms`);
    }, timeoutMs);
    const onAbort = () => cancel(String(signal.reason ?? "cancelled"));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    try {
      const headers: Record<string, string> = {
        ...this.outgoingHeaders,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": transport.sessionId!,
      };
      if (transport.protocolVersion) headers["mcp-protocol-version"] = transport.protocolVersion;
      // The tool call's span, as MCP carries it (docs/observability.md "Traces").
      const traceparent = outgoingTraceparent();
      const params = traceparent ? { name: tool, arguments: args, _meta: { traceparent } } : { name: tool, arguments: args };
      const body = JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params });
      const reply = await new Promise<Record<string, unknown>>((resolve, reject) => {
        abort.signal.addEventListener(
          "abort",
          () => reject(timedOut ? new McpError(ErrorCode.RequestTimeout, "Request timed out") : new Error("cancelled")),
          { once: true },
        );
        request((this.#url ??= new URL(this.record.url)), { method: "POST", headers, body, signal: abort.signal }).then((response) => {
          const type = response.headers["content-type"] ?? "";
          const status = response.statusCode ?? 0;
          let text = "";
          let settled = false;
          const deliver = (message: unknown) => {
            if (!isObject(message)) return;
            if (message.id === id && ("result" in message || "error" in message)) {
              settled = true;
              resolve(message);
            } else inFlight.run(call, () => transport.onmessage?.(message as never));
          };
          if (status < 200 || status > 299 || !type.startsWith("text/event-stream")) {
            response.setEncoding("utf8");
            response.on("error", reject);
            response.on("data", (chunk: string) => (text += chunk));
            response.on("end", () => {
              if (status < 200 || status > 299)
                return reject(new Error(`Error POSTing to endpoint (HTTP ${status}): ${text.slice(0, 200)}`));
              try {
                const parsed: unknown = JSON.parse(text);
                for (const message of Array.isArray(parsed) ? parsed : [parsed]) deliver(message);
              } catch (error) {
                return reject(error);
              }
              if (!settled) reject(new StreamEnded());
            });
            return;
          }
          // SSE, split by the project's one splitter, read to its end (the connection goes back
          // to the pool); a stream that ends or breaks before the reply ends the call, unless it
          // carried event ids: then it is resumed with a GET and `Last-Event-ID` (MCP Streamable
          // HTTP "Resumability and Redelivery"), as the SDK's transport does, a few times at most.
          void (async () => {
            let stream: IncomingMessage = response;
            for (let resumed = 0; ; resumed += 1) {
              const lastId = { value: undefined as string | undefined };
              try {
                for await (const data of readSseData(eventIds(stream, lastId))) {
                  let message: unknown;
                  try {
                    message = JSON.parse(data);
                  } catch {
                    continue; // Not JSON: ignored, as the SDK transport reports and skips it.
                  }
                  deliver(message);
                }
              } catch (error) {
                // An error of the connection (as Node's response emits it) fails the call as a
                // transport failure; a stream closed early without one is a stream ended (below).
                if ((error as NodeJS.ErrnoException).code !== "ERR_STREAM_PREMATURE_CLOSE") return reject(error);
              }
              if (settled || abort.signal.aborted) return;
              if (lastId.value === undefined || resumed >= MAX_RESUMES) return reject(new StreamEnded());
              try {
                stream = await request(this.#url!, {
                  method: "GET",
                  headers: { ...headers, accept: "text/event-stream", "last-event-id": lastId.value },
                  signal: abort.signal,
                });
              } catch (error) {
                return reject(error);
              }
              if ((stream.statusCode ?? 0) !== 200) {
                stream.resume();
                return reject(new StreamEnded());
              }
            }
          })();
        }, reject);
      });
      if (isObject(reply.error)) {
        const { code, message, data } = reply.error as { code?: unknown; message?: unknown; data?: unknown };
        throw new McpError(typeof code === "number" ? code : ErrorCode.InternalError, String(message ?? "error"), data);
      }
      if (!isObject(reply.result)) throw new McpError(ErrorCode.InvalidRequest, "Invalid tools/call result");
      const result = reply.result;
      if (result.content !== undefined && !Array.isArray(result.content))
        throw new McpError(ErrorCode.InvalidRequest, "Invalid tools/call result: content must be an array");
      return (result.content === undefined ? { ...result, content: [] } : result) as unknown as ToolResult;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    }
  }

  /**
   * The upstream session of the client session being served (clientSession), opened on its
   * first request to this server; undefined for clients without client features, or when the
   * bounds are reached or it could not open (the shared connection serves the request then).
   */
  #ownSession(): Promise<OwnSession | undefined> | undefined {
    const owner = clientSession.getStore();
    const bounds = this.#settings.sessions;
    if (!owner || !bounds || this.#closed) return undefined;
    let pending = this.#own.get(owner.id);
    if (pending) return pending;
    // Past a bound the client session stays on the shared connection for its life (told once).
    if (this.#refused.has(owner.id)) return undefined;
    const refuse = (bound: string) => {
      this.#refused.add(owner.id);
      this.#settings.log.info({
        level: "warn",
        msg: `MCP server ${this.record.name}: ${bound} reached; MCP session ${owner.id} uses the shared connection`,
      });
      return undefined;
    };
    if (this.#own.size >= bounds.perServer) return refuse(`MCP_UPSTREAM_SESSIONS_PER_SERVER (${bounds.perServer})`);
    if (!bounds.take(owner.userId)) return refuse(`MCP_UPSTREAM_SESSIONS_PER_USER for user ${owner.userId}`);
    // Opened outside the request's context: the session's GET stream (read in the context it
    // was opened in) must carry nobody's call.
    pending = inFlight
      .exit(() => clientSession.exit(() => this.#openOwn(owner)))
      .catch((error: unknown) => {
        this.#settings.log.info({
          level: "warn",
          msg: `MCP server ${this.record.name}: upstream session for ${owner.id} failed to open: ${describeError(error, this.#settings.timeoutMs)}`,
        });
        if (this.#own.get(owner.id) === pending) this.#own.delete(owner.id);
        bounds.give(owner.userId);
        return undefined;
      });
    this.#own.set(owner.id, pending);
    return pending;
  }

  async #openOwn(owner: ClientSessionLink): Promise<OwnSession> {
    const { sampling, elicitation, roots } = owner.capabilities;
    // The client's own capabilities and clientInfo: the server sees the client it serves.
    const client = new Client(owner.clientInfo, {
      capabilities: { ...(sampling ? { sampling } : {}), ...(elicitation ? { elicitation } : {}), ...(roots ? { roots } : {}) },
    });
    const transport = new StreamableHTTPClientTransport(new URL(this.record.url), {
      requestInit: { headers: this.outgoingHeaders },
      fetch: watchedFetch(this.#settings.fetch ?? fetch),
    });
    for (const [schema, method] of RELAYED) {
      if (!owner.capabilities[method === "sampling/createMessage" ? "sampling" : method === "elicitation/create" ? "elicitation" : "roots"])
        continue;
      client.setRequestHandler(
        schema as typeof CreateMessageRequestSchema,
        (request, extra) => this.#relayOwn(owner, { method, params: request.params as Record<string, unknown> }, extra.signal) as never,
      );
    }
    client.onerror = () => undefined;
    client.onclose = () => {
      void this.#own.get(owner.id)?.then((session) => {
        if (session?.client === client) this.#closeOwn(owner.id);
      });
    };
    // Its log messages are this client's only.
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => owner.log(this.record.name, notification.params));
    try {
      await client.connect(transport, { timeout: this.#settings.timeoutMs });
      const level = owner.loggingLevel();
      if (level && client.getServerCapabilities()?.logging)
        await client.setLoggingLevel(level, { timeout: this.#settings.timeoutMs }).catch(() => undefined);
    } catch (error) {
      await client.close().catch(() => undefined);
      throw error;
    }
    return { client, transport, owner };
  }

  /**
   * A request of the server on a client's own upstream session: related to a call of that
   * client, it goes on the call's answer stream; otherwise on the client's GET stream.
   */
  #relayOwn(owner: ClientSessionLink, request: ClientRequest, signal: AbortSignal): Promise<Record<string, unknown>> {
    const call = inFlight.getStore();
    if (call && !call.done && call.relay) return call.relay(request, { signal, timeoutMs: this.#settings.timeoutMs });
    return owner.request(request, { signal, timeoutMs: this.#settings.timeoutMs });
  }

  /** The client session ended (or its upstream session broke): its upstream session ends. */
  #closeOwn(id: string): void {
    this.#refused.delete(id);
    const pending = this.#own.get(id);
    if (!pending) return;
    this.#own.delete(id);
    void pending.then(async (session) => {
      if (!session) return;
      this.#settings.sessions?.give(session.owner.userId);
      // DELETE tells the server the session is over (MCP Streamable HTTP "Session Management").
      await session.transport.terminateSession().catch(() => undefined);
      await session.client.close().catch(() => undefined);
    });
  }

  /** Upstream sessions open for client sessions on this connection (tests, metrics). */
  get ownSessions(): number {
    return this.#own.size;
  }

  /** The client changed its roots: its upstream session here is told (`notifications/roots/list_changed`). */
  rootsChanged(id: string): void {
    void this.#own.get(id)?.then((session) => session?.client.sendRootsListChanged().catch(() => undefined));
  }

  /** The client set its log level: forwarded to its upstream session here, if the server logs. */
  async setLevel(id: string, level: LoggingLevel): Promise<void> {
    const session = await this.#own.get(id);
    if (session?.client.getServerCapabilities()?.logging)
      await session.client.setLoggingLevel(level, { timeout: this.#settings.timeoutMs }).catch(() => undefined);
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
    for (const id of [...this.#own.keys()]) this.#closeOwn(id);
    this.#tools = [];
    await this.#dropClient();
  }
}

function describeError(error: unknown, timeoutMs: number): string {
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
