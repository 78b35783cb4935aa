import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { JsonResponseTransport } from "./internal/json-transport.js";
import type { Principal } from "../../rpc/auth.js";
import type { Catalog, SourceLog, SourceNotice } from "../catalog.js";
import { namespacedUri } from "../../rpc/tools/mcp-federation.js";
import type { ToolScope } from "../../rpc/tools/types.js";
import type { SessionClaims } from "./session-id.js";
import type { Bus } from "../../storage/bus.js";
import type { ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { isObject } from "../../rpc/validate.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { declaresClientFeatures } from "./client-relay.js";
import { awaitsResponse } from "./sdk-internals.js";

/** Bus channel of one session's notifications, heard by the instance holding its GET stream. */
const channelOf = (session: McpSession) => `mcp.session.${session.claims.nonce}`;
/** Bus channel of the client's answers to requests an instance sent it (heard by every copy). */
const answersOf = (session: McpSession) => `mcp.answers.${session.claims.nonce}`;

export interface McpSession {
  /** Sealed claims (bridge/mcp/session-id.ts): any instance rebuilds the session from it. */
  id: string;
  claims: SessionClaims;
  /** Sessions belong to the user who opened them; anyone else gets 404. */
  userId: string;
  /** The credential of the latest request (another key of the same user may follow). */
  principal: Principal;
  /** The latest request's id, for the log lines of what it runs. */
  requestId: string;
  /** Whose sources' log messages this session may receive (the catalog scope of its user). */
  scope: ToolScope;
  /** Opened on `/bridge/mcp/servers/{name}/`: that upstream server's session (its requests only there). */
  upstream?: string;
  server: Server;
  transport: JsonResponseTransport;
  lastSeen: number;
  /** The standalone GET SSE stream is open: notifications can be delivered now. */
  streamOpen: boolean;
  /** The tool list changed while no GET stream was open; told once the stream opens. */
  pendingListChanged: boolean;
}

// Catalog changes come in bursts (a VM announcing tools, a server refreshing); one
// notification per burst is enough for a client to list again.
const DEBOUNCE_MS = 20;

/**
 * The open MCP sessions of this instance, their idle expiry, and the fan-out of
 * `notifications/tools/list_changed` when the catalog changes (docs/interface.md 4.5).
 */
export class McpSessions {
  readonly #sessions = new Map<string, McpSession>();
  /** Session ids per user, in the order they opened. */
  readonly #byUser = new Map<string, Set<string>>();
  readonly #idleMs: number;
  readonly #maxPerUser: number;
  readonly #sweep: NodeJS.Timeout;
  readonly #unsubscribe: () => void;
  readonly #unsubscribeLog: () => void;
  readonly #unsubscribeNotice: () => void;
  readonly #release: (sessionId: string) => void;
  readonly #evicted: (session: McpSession) => void;
  readonly #bus: Bus | undefined;
  /** Sessions whose GET stream is open here: their bus subscription (resolves to the unsubscribe). */
  readonly #listening = new Map<string, Promise<(() => Promise<void>) | undefined>>();
  /** Sessions whose client may be asked things (sampling, elicitation, roots): their answers' subscription. */
  readonly #answering = new Map<string, Promise<(() => Promise<void>) | undefined>>();
  #debounce: NodeJS.Timeout | undefined;

  /**
   * @param maxPerUser MCP_MAX_SESSIONS_PER_USER: sessions one user may hold here; a client that
   *   initializes in a loop would otherwise keep a server and transport alive per call.
   */
  constructor(
    catalog: Catalog,
    idleSeconds: number,
    maxPerUser = 100,
    release: (sessionId: string) => void = () => undefined,
    evicted: (session: McpSession) => void = () => undefined,
    bus?: Bus,
  ) {
    this.#bus = bus;
    this.#release = release;
    this.#evicted = evicted;
    this.#idleMs = idleSeconds * 1000;
    this.#maxPerUser = maxPerUser;
    this.#sweep = setInterval(() => this.#expire(), Math.min(60_000, this.#idleMs / 2));
    this.#sweep.unref();
    this.#unsubscribeLog = catalog.onLog((entry) => this.relayLog(entry));
    this.#unsubscribeNotice = catalog.onNotice((entry) => this.relayNotice(entry));
    this.#unsubscribe = catalog.onChange(() => {
      if (this.#debounce) return;
      this.#debounce = setTimeout(() => {
        this.#debounce = undefined;
        this.notifyListChanged();
      }, DEBOUNCE_MS);
      this.#debounce.unref();
    });
  }

  get size(): number {
    return this.#sessions.size;
  }

  all(): McpSession[] {
    return [...this.#sessions.values()];
  }

  get(id: string): McpSession | undefined {
    return this.#sessions.get(id);
  }

  /** Adds a session; past MCP_MAX_SESSIONS_PER_USER the user's least recently used other session here ends (its next request, on any instance, gets 404). */
  add(session: McpSession): void {
    this.#sessions.set(session.id, session);
    // A request of this copy's server to the client may be answered through another instance.
    if (this.#bus && declaresClientFeatures(session.claims.capabilities)) {
      const heard = this.#bus
        .subscribe(answersOf(session), (message) => {
          if (isObject(message) && awaitsResponse(session.server, message.id))
            session.transport.onmessage?.(message as unknown as JSONRPCMessage);
        })
        .catch(() => undefined);
      this.#answering.set(session.id, heard);
    }
    let ids = this.#byUser.get(session.userId);
    if (!ids) this.#byUser.set(session.userId, (ids = new Set()));
    ids.add(session.id);
    while (ids.size > this.#maxPerUser) {
      const oldest = this.#leastRecentlyUsed(ids, session.id);
      if (!oldest) break;
      // Ended for good (every instance refuses it), not just this instance's copy.
      this.#evicted(oldest);
      void this.#end(oldest);
    }
  }

  delete(id: string): void {
    const session = this.#sessions.get(id);
    if (!session) return;
    this.#sessions.delete(id);
    // Its resource subscriptions end with it (the upstream server is told when nobody else holds one).
    this.#release(id);
    const ids = this.#byUser.get(session.userId);
    ids?.delete(id);
    if (ids?.size === 0) this.#byUser.delete(session.userId);
  }

  /** The session with the oldest last request among `ids` (the first opened on a tie), never `keep`. */
  #leastRecentlyUsed(ids: Set<string>, keep: string): McpSession | undefined {
    let oldest: McpSession | undefined;
    for (const id of ids) {
      const candidate = this.#sessions.get(id);
      if (!candidate || id === keep) continue;
      if (!oldest || candidate.lastSeen < oldest.lastSeen) oldest = candidate;
    }
    return oldest;
  }

  notifyListChanged(): void {
    for (const session of this.#sessions.values()) {
      if (session.streamOpen) void session.server.sendToolListChanged().catch(() => undefined);
      else session.pendingListChanged = true;
    }
  }

  /**
   * A source's log message to every session whose user sees that source (a tenant's server:
   * that tenant's sessions; a shared one: everyone's), each filtered by its logging/setLevel.
   */
  relayLog(entry: SourceLog): void {
    for (const session of this.#sessions.values()) {
      const sees = entry.owner === undefined || ("tenantId" in session.scope && session.scope.tenantId === entry.owner);
      if (!sees || !session.streamOpen) continue;
      let logger = entry.logger;
      // A server's own endpoint hears that server only, with the server's own logger names.
      if (session.upstream !== undefined) {
        if (entry.source !== session.upstream) continue;
        logger = logger.startsWith(`${session.upstream}/`) ? logger.slice(session.upstream.length + 1) : logger;
      }
      void session.server.sendLoggingMessage({ level: entry.level, logger, data: entry.data }, session.id).catch(() => undefined);
    }
  }

  /**
   * An upstream server's notification to the sessions whose user sees that server (and, on a
   * server's own endpoint, only that server's): `resources/updated` only to the sessions that
   * subscribed to the URI, under the URI they subscribed with.
   */
  relayNotice(entry: SourceNotice): void {
    for (const session of this.#sessions.values()) {
      const sees = entry.owner === undefined || ("tenantId" in session.scope && session.scope.tenantId === entry.owner);
      if (!sees) continue;
      if (session.upstream !== undefined && entry.source !== session.upstream) continue;
      // A subscription made here whose client holds its stream on another instance: sent there.
      if (entry.kind === "resources/updated" && !session.streamOpen && entry.subscribers.includes(session.id)) {
        const uri = session.upstream === undefined ? namespacedUri(entry.source, entry.uri) : entry.uri;
        this.deliver(session, { method: "notifications/resources/updated", params: { uri } });
        continue;
      }
      if (!session.streamOpen) continue;
      const sent =
        entry.kind === "resources/updated"
          ? entry.subscribers.includes(session.id)
            ? session.server.sendResourceUpdated({
                uri: session.upstream === undefined ? namespacedUri(entry.source, entry.uri) : entry.uri,
              })
            : undefined
          : entry.kind === "resources/list_changed"
            ? session.server.sendResourceListChanged()
            : session.server.sendPromptListChanged();
      // A session given no resources or prompts capability at initialize is not told (the SDK refuses).
      void sent?.catch(() => undefined);
    }
  }

  /**
   * A notification for one session (an upstream server's `resources/updated` for its
   * subscription, a log message of its own upstream session): on its GET stream when this
   * instance holds it, else over the bus to the instance that does (docs/mcp.md "Sessions on
   * any instance"); dropped when no instance holds one, as on a single instance.
   */
  deliver(session: McpSession, notification: ServerNotification): void {
    if (session.streamOpen) {
      void session.server.notification(notification).catch(() => undefined);
      return;
    }
    void this.#bus?.publish(channelOf(session), notification).catch(() => undefined);
  }

  /** Called when a session's GET stream opened: deliver what it missed. */
  streamOpened(session: McpSession): void {
    session.streamOpen = true;
    if (this.#bus && !this.#listening.has(session.id)) {
      const heard = this.#bus
        .subscribe(channelOf(session), (message) => {
          if (isObject(message) && typeof message.method === "string" && session.streamOpen)
            void session.server.notification(message as ServerNotification).catch(() => undefined);
        })
        .catch(() => undefined);
      this.#listening.set(session.id, heard);
    }
    if (!session.pendingListChanged) return;
    session.pendingListChanged = false;
    void session.server.sendToolListChanged().catch(() => undefined);
  }

  /** The GET stream ended (client went away): notifications wait for the next one. */
  streamClosed(session: McpSession): void {
    session.streamOpen = false;
    this.#stopListening(session.id);
    session.lastSeen = Date.now();
  }

  /**
   * Idle copies go (memory); the session itself lives on until its id expires or it is
   * deleted: its client may be busy on another instance (docs/mcp.md "Sessions on any instance").
   */
  #expire(): void {
    const cutoff = Date.now() - this.#idleMs;
    for (const session of [...this.#sessions.values()]) {
      // A client holding the GET stream open is waiting for notifications, not idle.
      if (session.lastSeen < cutoff && !session.streamOpen) void this.#end(session);
    }
  }

  #stopListening(id: string): void {
    this.#drop(this.#listening, id);
  }

  #drop(subscriptions: Map<string, Promise<(() => Promise<void>) | undefined>>, id: string): void {
    const heard = subscriptions.get(id);
    if (!heard) return;
    subscriptions.delete(id);
    void heard.then((unsubscribe) => unsubscribe?.()).catch(() => undefined);
  }

  /**
   * The client's answers (JSON-RPC results or errors) to requests this instance's copy did not
   * send: published for the copy, on whichever instance, that waits for them. False when some
   * answer is this copy's own (the transport takes the POST as usual then).
   */
  async forwardAnswers(session: McpSession, answers: readonly { id?: unknown }[]): Promise<boolean> {
    if (!this.#bus || answers.some((answer) => awaitsResponse(session.server, answer.id))) return false;
    for (const answer of answers) await this.#bus.publish(answersOf(session), answer);
    return true;
  }

  /** Ends this instance's copy of session `id` (ended elsewhere), if it holds one. */
  async end(id: string): Promise<void> {
    const session = this.#sessions.get(id);
    if (session) await this.#end(session);
  }

  async #end(session: McpSession): Promise<void> {
    this.delete(session.id);
    await session.server.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    this.#unsubscribeLog();
    this.#unsubscribeNotice();
    clearTimeout(this.#debounce);
    this.#unsubscribe();
    await Promise.all([...this.#sessions.values()].map((session) => this.#end(session)));
  }
}
