import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CreateMessageRequestSchema, type LoggingLevel, LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../../rpc/log.js";
import type { GuardedFetch } from "../../rpc/outbound/guarded-fetch.js";
import type { ClientRequest } from "../../rpc/tools/types.js";
import { inFlight, RELAYED, watchedFetch } from "./call-context.js";
import { clientSession, type ClientSessionLink } from "./client-session.js";
import { describeError } from "./describe-error.js";

export interface UpstreamSessionBounds {
  perServer: number;
  /** Counts one more upstream session of `userId`; false past MCP_UPSTREAM_SESSIONS_PER_USER. */
  take(userId: string): boolean;
  give(userId: string): void;
}

/** An SDK client and its transport: the shared connection's, or one client session's own. */
export interface Link {
  client: Client;
  transport: StreamableHTTPClientTransport;
}

/** An upstream session opened for one client session (docs/mcp.md "Upstream sessions"). */
export interface OwnSession extends Link {
  owner: ClientSessionLink;
}

/** What the upstream sessions of one server need of its connection. */
export interface OwnSessionsSettings {
  /** The server's name (log lines) and URL. */
  name: string;
  url: string;
  /** What every request to the server carries (changed in place when the gateway's token is refreshed). */
  headers: Record<string, string>;
  timeoutMs: number;
  fetch?: GuardedFetch;
  log: Logger;
  bounds?: UpstreamSessionBounds;
  /** The connection was closed: no session opens any more. */
  closed(): boolean;
}

/**
 * The upstream sessions one connection opens for client sessions that declared client features
 * (sampling, elicitation, roots: docs/mcp.md "Upstream sessions"), each with the client's own
 * capabilities and clientInfo, within the per-server and per-user bounds; a client session
 * refused one (or whose session failed to open) is served by the shared connection.
 */
export class OwnSessions {
  /** By client session id (undefined: refused or failed, the shared connection serves it). */
  readonly #own = new Map<string, Promise<OwnSession | undefined>>();
  /** Client sessions refused one (a bound was reached): the shared connection serves them. */
  readonly #refused = new Set<string>();
  readonly #settings: OwnSessionsSettings;

  constructor(settings: OwnSessionsSettings) {
    this.#settings = settings;
  }

  /** Upstream sessions open (tests, metrics). */
  get size(): number {
    return this.#own.size;
  }

  /**
   * The upstream session of the client session being served (clientSession), opened on its
   * first request to this server; undefined for clients without client features, or when the
   * bounds are reached or it could not open (the shared connection serves the request then).
   */
  current(): Promise<OwnSession | undefined> | undefined {
    const owner = clientSession.getStore();
    const { bounds, log, name } = this.#settings;
    if (!owner || !bounds || this.#settings.closed()) return undefined;
    let pending = this.#own.get(owner.id);
    if (pending) return pending;
    // Past a bound the client session stays on the shared connection for its life (told once).
    if (this.#refused.has(owner.id)) return undefined;
    const refuse = (bound: string) => {
      this.#refused.add(owner.id);
      log.info({ level: "warn", msg: `MCP server ${name}: ${bound} reached; MCP session ${owner.id} uses the shared connection` });
      return undefined;
    };
    if (this.#own.size >= bounds.perServer) return refuse(`MCP_UPSTREAM_SESSIONS_PER_SERVER (${bounds.perServer})`);
    if (!bounds.take(owner.userId)) return refuse(`MCP_UPSTREAM_SESSIONS_PER_USER for user ${owner.userId}`);
    // Opened outside the request's context: the session's GET stream (read in the context it
    // was opened in) must carry nobody's call.
    pending = inFlight
      .exit(() => clientSession.exit(() => this.#open(owner)))
      .catch((error: unknown) => {
        log.info({
          level: "warn",
          msg: `MCP server ${name}: upstream session for ${owner.id} failed to open: ${describeError(error, this.#settings.timeoutMs)}`,
        });
        if (this.#own.get(owner.id) === pending) this.#own.delete(owner.id);
        bounds.give(owner.userId);
        return undefined;
      });
    this.#own.set(owner.id, pending);
    return pending;
  }

  async #open(owner: ClientSessionLink): Promise<OwnSession> {
    const { sampling, elicitation, roots } = owner.capabilities;
    const { timeoutMs } = this.#settings;
    // The client's own capabilities and clientInfo: the server sees the client it serves.
    const client = new Client(owner.clientInfo, {
      capabilities: { ...(sampling ? { sampling } : {}), ...(elicitation ? { elicitation } : {}), ...(roots ? { roots } : {}) },
    });
    const transport = new StreamableHTTPClientTransport(new URL(this.#settings.url), {
      requestInit: { headers: this.#settings.headers },
      fetch: watchedFetch(this.#settings.fetch ?? fetch),
    });
    for (const [schema, method] of RELAYED) {
      if (!owner.capabilities[method === "sampling/createMessage" ? "sampling" : method === "elicitation/create" ? "elicitation" : "roots"])
        continue;
      client.setRequestHandler(
        schema as typeof CreateMessageRequestSchema,
        (request, extra) => this.#relay(owner, { method, params: request.params as Record<string, unknown> }, extra.signal) as never,
      );
    }
    client.onerror = () => undefined;
    client.onclose = () => {
      void this.#own.get(owner.id)?.then((session) => {
        if (session?.client === client) this.close(owner.id);
      });
    };
    // Its log messages are this client's only.
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => owner.log(this.#settings.name, notification.params));
    try {
      await client.connect(transport, { timeout: timeoutMs });
      const level = owner.loggingLevel();
      if (level && client.getServerCapabilities()?.logging)
        await client.setLoggingLevel(level, { timeout: timeoutMs }).catch(() => undefined);
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
  #relay(owner: ClientSessionLink, request: ClientRequest, signal: AbortSignal): Promise<Record<string, unknown>> {
    const call = inFlight.getStore();
    const { timeoutMs } = this.#settings;
    if (call && !call.done && call.relay) return call.relay(request, { signal, timeoutMs });
    return owner.request(request, { signal, timeoutMs });
  }

  /** The client session ended (or its upstream session broke): its upstream session ends. */
  close(id: string): void {
    this.#refused.delete(id);
    const pending = this.#own.get(id);
    if (!pending) return;
    this.#own.delete(id);
    void pending.then(async (session) => {
      if (!session) return;
      this.#settings.bounds?.give(session.owner.userId);
      // DELETE tells the server the session is over (MCP Streamable HTTP "Session Management").
      await session.transport.terminateSession().catch(() => undefined);
      await session.client.close().catch(() => undefined);
    });
  }

  /** Every upstream session ends (the connection closes). */
  closeAll(): void {
    for (const id of [...this.#own.keys()]) this.close(id);
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
}
