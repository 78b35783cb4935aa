import { randomUUID } from "node:crypto";
import { ServiceError } from "../../rpc/errors.js";
import type { Config } from "../../rpc/config.js";
import type { Logger } from "../../rpc/log.js";
import type { Store } from "../../storage/store.js";
import { McpServersRepo, type McpServerRecord } from "../../storage/repos/mcp-servers.js";
import type { Catalog } from "../catalog.js";
import { AddressRefused, OutboundGuard, type ResolveHost } from "../../rpc/policies/outbound-guard.js";
import { toGuardedFetch, type GuardedFetch } from "../../rpc/policies/guarded-fetch.js";
import { UpstreamConnection, type Health } from "./connection.js";

/** Bus channel on which instances tell each other a server was registered or removed. */
const CHANNEL = "mcp-servers";

interface ServerEvent {
  op: "added" | "removed";
  name: string;
  from: string;
}

export interface ServerView {
  name: string;
  url: string;
  category: string;
  /** Names of the headers sent upstream; values are secrets and never shown. */
  headers: string[];
  health: Health;
  lastError: string | null;
  toolCount: number;
  tools: string[];
  connectedAt: string | null;
  createdAt: string;
}

export interface RegisterInput {
  name: string;
  url: string;
  headers: Record<string, string>;
  category: string;
  createdBy: string;
}

/**
 * The registered upstream MCP servers of this instance: loads them from storage at start,
 * keeps one connection each, and follows registrations made on other instances through the
 * bus (DESIGN "More than one instance").
 */
export class UpstreamServers {
  readonly repo: McpServersRepo;
  readonly #connections = new Map<string, UpstreamConnection>();
  readonly #instance = randomUUID();
  readonly #catalog: Catalog;
  readonly #store: Store;
  readonly #config: Config;
  readonly #log: Logger;
  readonly #guard: OutboundGuard;
  readonly #fetch: GuardedFetch;
  #unsubscribe: (() => Promise<void>) | undefined;

  constructor(deps: { catalog: Catalog; store: Store; config: Config; log: Logger; resolveHost?: ResolveHost }) {
    this.#catalog = deps.catalog;
    // Servers stored while MCP_SERVERS_ALLOW_PRIVATE was on are refused at connect once it is off.
    this.#guard = new OutboundGuard({
      allowPrivate: deps.config.MCP_SERVERS_ALLOW_PRIVATE,
      resolve: deps.resolveHost,
      hint: "private addresses need MCP_SERVERS_ALLOW_PRIVATE=true",
    });
    this.#fetch = toGuardedFetch(this.#guard);
    this.#store = deps.store;
    this.#config = deps.config;
    this.#log = deps.log;
    this.repo = new McpServersRepo(deps.store);
  }

  /** Subscribes to the bus, then connects every stored server in the background. */
  async start(): Promise<void> {
    this.#unsubscribe = await this.#store.bus.subscribe(CHANNEL, (message) => void this.#onEvent(message as ServerEvent));
    for (const record of await this.repo.list()) void this.#attach(record).connect();
  }

  async #onEvent(event: ServerEvent): Promise<void> {
    if (!event || event.from === this.#instance) return;
    try {
      if (event.op === "removed") {
        await this.#detach(event.name);
        return;
      }
      const record = await this.repo.get(event.name);
      if (record && !this.#connections.has(record.name)) await this.#attach(record).connect();
    } catch (error) {
      this.#log.error({ error: `mcp-servers event ${event.op} ${event.name}: ${(error as Error).message}` });
    }
  }

  #attach(record: McpServerRecord): UpstreamConnection {
    const existing = this.#connections.get(record.name);
    if (existing) return existing;
    const connection = new UpstreamConnection(record, {
      timeoutMs: this.#config.GATEWAY_TIMEOUT_SECONDS * 1000,
      maxRetries: this.#config.GATEWAY_MAX_RETRIES,
      onChange: () => this.#catalog.changed(),
      log: this.#log,
      fetch: this.#fetch,
    });
    this.#connections.set(record.name, connection);
    this.#catalog.addSource(connection);
    return connection;
  }

  async #detach(name: string): Promise<boolean> {
    const connection = this.#connections.get(name);
    if (!connection) return false;
    this.#connections.delete(name);
    this.#catalog.removeSource(connection.id);
    await connection.close();
    return true;
  }

  /**
   * Stores and connects a server, waiting for the first connection attempt so the answer
   * says whether it is healthy. A server that is down is still registered (and retried).
   */
  async register(input: RegisterInput): Promise<ServerView> {
    await this.#checkAddress(input.url);
    const record: McpServerRecord = { ...input, createdAt: new Date().toISOString() };
    if (!(await this.repo.create(record))) throw new ServiceError("CONFLICT", `An MCP server named ${input.name} is already registered`);
    const connection = this.#attach(record);
    await this.#store.bus.publish(CHANNEL, { op: "added", name: record.name, from: this.#instance } satisfies ServerEvent);
    await connection.connect();
    return view(connection);
  }

  async remove(name: string): Promise<void> {
    const record = await this.repo.get(name);
    if (!record) throw new ServiceError("NOT_FOUND", `No MCP server named ${name}`);
    await this.repo.remove(name);
    await this.#detach(name);
    await this.#store.bus.publish(CHANNEL, { op: "removed", name, from: this.#instance } satisfies ServerEvent);
  }

  /** Every stored server, with this instance's view of its health. */
  async list(): Promise<ServerView[]> {
    const records = await this.repo.list();
    return records.map((record) => {
      const connection = this.#connections.get(record.name);
      return connection ? view(connection) : view(new UpstreamConnection(record, { timeoutMs: 0, maxRetries: 0, onChange: () => undefined, log: this.#log }));
    });
  }

  /** Health of the servers this instance holds, for `/bridge/health`. */
  summary(): { name: string; health: Health; toolCount: number; lastError: string | null }[] {
    return [...this.#connections.values()].map((c) => ({ name: c.record.name, health: c.health, toolCount: c.toolCount, lastError: c.lastError ?? null }));
  }

  /**
   * An upstream address is reached from inside the deployment, so private and loopback
   * addresses are refused unless MCP_SERVERS_ALLOW_PRIVATE says the operator wants them.
   * Checked here for a clear 403 at registration, and again by the guarded fetch on every
   * connection (the name may resolve elsewhere later).
   */
  async #checkAddress(url: string): Promise<void> {
    if (this.#guard.allowPrivate) return;
    const host = new URL(url).hostname;
    try {
      await this.#guard.resolve(host);
    } catch (error) {
      if (error instanceof AddressRefused) throw new ServiceError("FORBIDDEN", `MCP server address refused: ${error.message}`);
      throw new ServiceError("VALIDATION_FAILED", `Cannot resolve the MCP server's host: ${host}`, { details: { issues: [{ path: "url", message: "host does not resolve" }] } });
    }
  }

  async close(): Promise<void> {
    await this.#unsubscribe?.().catch(() => undefined);
    const connections = [...this.#connections.values()];
    this.#connections.clear();
    await Promise.all(connections.map((connection) => connection.close()));
    this.#guard.close();
  }
}

function view(connection: UpstreamConnection): ServerView {
  const { record } = connection;
  return {
    name: record.name,
    url: record.url,
    category: record.category,
    headers: Object.keys(record.headers),
    health: connection.health,
    lastError: connection.lastError ?? null,
    toolCount: connection.toolCount,
    tools: connection.toolNames,
    connectedAt: connection.connectedAt ?? null,
    createdAt: record.createdAt,
  };
}
