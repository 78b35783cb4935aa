import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { JsonResponseTransport } from "./internal/json-transport.js";
import type { Principal } from "../../rpc/auth.js";
import type { Catalog } from "../catalog.js";

export interface McpSession {
  id: string;
  /** Sessions belong to the user who opened them; anyone else gets 404. */
  userId: string;
  /** The credential of the latest request (another key of the same user may follow). */
  principal: Principal;
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
 * `notifications/tools/list_changed` when the catalog changes (spec 4.5).
 */
export class McpSessions {
  readonly #sessions = new Map<string, McpSession>();
  readonly #idleMs: number;
  readonly #sweep: NodeJS.Timeout;
  readonly #unsubscribe: () => void;
  #debounce: NodeJS.Timeout | undefined;

  constructor(catalog: Catalog, idleSeconds: number) {
    this.#idleMs = idleSeconds * 1000;
    this.#sweep = setInterval(() => this.#expire(), Math.min(60_000, this.#idleMs / 2));
    this.#sweep.unref();
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

  add(session: McpSession): void {
    this.#sessions.set(session.id, session);
  }

  delete(id: string): void {
    this.#sessions.delete(id);
  }

  notifyListChanged(): void {
    for (const session of this.#sessions.values()) {
      if (session.streamOpen) void session.server.sendToolListChanged().catch(() => undefined);
      else session.pendingListChanged = true;
    }
  }

  /** Called when a session's GET stream opened: deliver what it missed. */
  streamOpened(session: McpSession): void {
    session.streamOpen = true;
    if (!session.pendingListChanged) return;
    session.pendingListChanged = false;
    void session.server.sendToolListChanged().catch(() => undefined);
  }

  /** The GET stream ended (client went away): notifications wait for the next one. */
  streamClosed(session: McpSession): void {
    session.streamOpen = false;
    session.lastSeen = Date.now();
  }

  #expire(): void {
    const cutoff = Date.now() - this.#idleMs;
    for (const session of [...this.#sessions.values()]) {
      // A client holding the GET stream open is waiting for notifications, not idle.
      if (session.lastSeen < cutoff && !session.streamOpen) void this.#end(session);
    }
  }

  async #end(session: McpSession): Promise<void> {
    this.#sessions.delete(session.id);
    await session.server.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    clearTimeout(this.#debounce);
    this.#unsubscribe();
    await Promise.all([...this.#sessions.values()].map((session) => this.#end(session)));
  }
}
