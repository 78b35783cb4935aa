import { randomUUID } from "node:crypto";
import { ServiceError } from "../../rpc/errors.js";
import type { Config } from "../../rpc/config.js";
import type { Logger } from "../../rpc/log.js";
import type { Store } from "../../storage/store.js";
import type { SecretBox } from "../../storage/secret-box.js";
import { McpServersRepo, type McpServerEvent, type McpServerRecord } from "../../storage/repos/mcp-servers.js";
import { QuotasRepo } from "../../storage/repos/quotas.js";
import { createWithinQuota } from "../../rpc/quotas.js";
import type { Catalog } from "../catalog.js";
import type { UpstreamRegisterInput, UpstreamServerHandle, UpstreamServerView, UpstreamSummary } from "../../rpc/tools/ports.js";
import type { ToolScope } from "../../rpc/tools/types.js";
import { AddressRefused, OutboundGuard, type ResolveHost } from "../../rpc/outbound/outbound-guard.js";
import { guardedRequest, toGuardedFetch, type GuardedFetch } from "../../rpc/outbound/guarded-fetch.js";
import type { LoggingLevel } from "@modelcontextprotocol/sdk/types.js";
import { UpstreamConnection } from "./connection.js";
import type { UpstreamSessionBounds } from "./own-sessions.js";
import { UpstreamAuthorizations } from "./authorizations.js";
import { UpstreamOAuthRepo } from "../../storage/repos/upstream-oauth.js";
import type { EmitEvent } from "../../rpc/tools/ports.js";

/**
 * How often stored registrations are compared with this instance's connections. Redis tells
 * every instance at once over the bus; this catches what the bus cannot carry on fs: a shared
 * server the admin command (another process) registered or removed.
 */
const RESYNC_MS = 15_000;

/** `vm__<vmId>__<tool>` is the VM tools' namespace: a server named `vm` could shadow them. */
const RESERVED_NAMES = new Set(["vm"]);

/** One key per server across owners: the same name may exist once per tenant and once shared. */
const refOf = (tenantId: string | null, name: string) => `${tenantId ?? "*"}/${name}`;

/**
 * The registered upstream MCP servers of this instance: loads them from storage at start,
 * keeps one connection each, and follows registrations made on other instances through the
 * bus (docs/architecture.md "More than one instance"). Each server belongs to a tenant, or is shared by an
 * operator (docs/architecture.md "Ownership"); its tools carry that owner into the catalog.
 */
export class UpstreamServers {
  readonly repo: McpServersRepo;
  readonly #quotas: QuotasRepo;
  readonly #connections = new Map<string, UpstreamConnection>();
  readonly #instance = randomUUID();
  readonly #catalog: Catalog;
  readonly #config: Config;
  readonly #log: Logger;
  readonly #guard: OutboundGuard;
  readonly #emit: EmitEvent | undefined;
  readonly #fetch: GuardedFetch;
  #unsubscribe: (() => Promise<void>) | undefined;
  #unsubscribeAuthorizations: (() => Promise<void>) | undefined;
  /** The gateway's OAuth authorizations at tenants' servers (docs/mcp.md "Upstream servers that need OAuth"). */
  readonly #authorizations: UpstreamAuthorizations;
  readonly #oauth: UpstreamOAuthRepo;
  #resync: NodeJS.Timeout | undefined;
  /** Upstream sessions of client sessions per user, across servers (MCP_UPSTREAM_SESSIONS_PER_USER). */
  readonly #ownSessions = new Map<string, number>();
  readonly #sessionBounds: UpstreamSessionBounds;

  constructor(deps: {
    catalog: Catalog;
    store: Store;
    secrets: SecretBox;
    config: Config;
    log: Logger;
    resolveHost?: ResolveHost;
    emit?: EmitEvent;
  }) {
    this.#catalog = deps.catalog;
    this.#emit = deps.emit;
    // Servers stored while MCP_SERVERS_ALLOW_PRIVATE was on are refused at connect once it is off.
    this.#guard = new OutboundGuard({
      allowPrivate: deps.config.MCP_SERVERS_ALLOW_PRIVATE,
      resolve: deps.resolveHost,
      hint: "this deployment does not connect to MCP servers on private addresses",
    });
    this.#fetch = toGuardedFetch(this.#guard);
    this.#config = deps.config;
    this.#log = deps.log;
    this.repo = new McpServersRepo(deps.store, deps.secrets);
    this.#oauth = new UpstreamOAuthRepo(deps.store, deps.secrets);
    this.#authorizations = new UpstreamAuthorizations({ repo: this.#oauth, fetch: this.#fetch, log: deps.log });
    this.#quotas = new QuotasRepo(deps.store);
    const perUser = deps.config.MCP_UPSTREAM_SESSIONS_PER_USER;
    this.#sessionBounds = {
      perServer: deps.config.MCP_UPSTREAM_SESSIONS_PER_SERVER,
      take: (userId) => {
        const held = this.#ownSessions.get(userId) ?? 0;
        if (held >= perUser) return false;
        this.#ownSessions.set(userId, held + 1);
        return true;
      },
      give: (userId) => {
        const held = (this.#ownSessions.get(userId) ?? 1) - 1;
        if (held > 0) this.#ownSessions.set(userId, held);
        else this.#ownSessions.delete(userId);
      },
    };
  }

  /** Upstream sessions open for client sessions on this instance (docs/mcp.md "Upstream sessions"). */
  get ownSessions(): number {
    let open = 0;
    for (const connection of this.#connections.values()) open += connection.ownSessions;
    return open;
  }

  /** Subscribes to the bus, then connects every stored server in the background. */
  async start(): Promise<void> {
    this.#unsubscribe = await this.repo.subscribe((event) => void this.#onEvent(event));
    // An authorization connected, refreshed or forgotten on any instance: this one's connection follows.
    this.#unsubscribeAuthorizations = await this.#oauth.subscribe((event) => {
      const connection = this.#connections.get(refOf(event.tenantId, event.server));
      if (connection) void this.#authorize(connection).catch(() => undefined);
    });
    for (const record of await this.repo.list()) void this.#connect(record);
    this.#resync = setInterval(
      () => void this.#sync().catch((error) => this.#log.error({ error: `mcp-servers resync: ${(error as Error).message}` })),
      RESYNC_MS,
    );
    this.#resync.unref();
  }

  async #onEvent(event: McpServerEvent): Promise<void> {
    if (!event || event.from === this.#instance) return;
    try {
      const tenantId = event.tenantId ?? null;
      if (event.op === "removed") {
        await this.#detach(tenantId, event.name);
        return;
      }
      const record = await this.repo.get(tenantId, event.name);
      if (record && !this.#connections.has(refOf(tenantId, record.name))) await this.#connect(record);
    } catch (error) {
      this.#log.error({ error: `mcp-servers event ${event.op} ${event.name}: ${(error as Error).message}` });
    }
  }

  /** Connects stored servers this instance does not hold, and drops the ones no longer stored. */
  async #sync(): Promise<void> {
    const records = await this.repo.list();
    const stored = new Set(records.map((record) => refOf(record.tenantId, record.name)));
    for (const record of records) if (!this.#connections.has(refOf(record.tenantId, record.name))) void this.#connect(record);
    for (const connection of [...this.#connections.values()]) {
      if (!stored.has(refOf(connection.record.tenantId, connection.record.name)))
        await this.#detach(connection.record.tenantId, connection.record.name);
    }
  }

  /** Attaches a stored server, with its OAuth authorization if it has one, and connects it. */
  async #connect(record: McpServerRecord): Promise<void> {
    const connection = this.#attach(record);
    await this.#authorizations
      .apply(connection)
      .catch((error: Error) => this.#log.error({ error: `upstream authorization: ${error.message}` }));
    await connection.connect();
  }

  /** Applies the server's current authorization, reconnecting when it changed what is sent. */
  async #authorize(connection: UpstreamConnection): Promise<void> {
    if (await this.#authorizations.apply(connection)) await connection.connect();
  }

  #attach(record: McpServerRecord): UpstreamConnection {
    const ref = refOf(record.tenantId, record.name);
    const existing = this.#connections.get(ref);
    if (existing) return existing;
    const connection = new UpstreamConnection(record, {
      timeoutMs: this.#config.GATEWAY_TIMEOUT_SECONDS * 1000,
      maxRetries: this.#config.GATEWAY_MAX_RETRIES,
      onChange: () => this.#catalog.changed(),
      // Shared servers have no tenant to tell (docs/events.md).
      onHealth: (health, lastError) =>
        this.#emit?.(record.tenantId ?? undefined, "mcp.server.health_changed", { name: record.name, health, lastError }),
      // A server refusing the gateway's token: refreshed (by one instance) and retried.
      onFailure: (reason) => this.#authorizations.unhealthy(connection, reason),
      onLog: (params) =>
        this.#catalog.log({
          owner: record.tenantId ?? undefined,
          source: record.name,
          logger: record.name,
          level: params.level,
          data: params.data,
          ...(params.logger ? { logger: `${record.name}/${params.logger}` } : {}),
        }),
      onNotice: (notice) => this.#catalog.notice({ ...notice, owner: record.tenantId ?? undefined, source: record.name }),
      log: this.#log,
      fetch: this.#fetch,
      request: (url, init) => guardedRequest(this.#guard, url, init),
      sessions: this.#sessionBounds,
    });
    this.#connections.set(ref, connection);
    this.#catalog.addSource(connection);
    return connection;
  }

  async #detach(tenantId: string | null, name: string): Promise<boolean> {
    const ref = refOf(tenantId, name);
    const connection = this.#connections.get(ref);
    if (!connection) return false;
    this.#connections.delete(ref);
    this.#authorizations.forget(connection);
    this.#catalog.removeSource(connection.id);
    await connection.close();
    return true;
  }

  /**
   * Stores and connects a tenant's server, waiting for the first connection attempt so the
   * answer says whether it is healthy. A server that is down is still registered (and retried).
   * 409 when the tenant already has the name or a shared server uses it, or already has
   * QUOTA_MCP_SERVERS_PER_TENANT servers (docs/quotas.md: counted and stored under the
   * tenant's lock; the first connection attempt runs after it).
   */
  async register(input: UpstreamRegisterInput): Promise<UpstreamServerView> {
    if (RESERVED_NAMES.has(input.name.toLowerCase())) throw new ServiceError("CONFLICT", `The name ${input.name} is reserved`);
    await this.#checkAddress(input.url);
    const record: McpServerRecord = { ...input, createdAt: new Date().toISOString() };
    const created = await createWithinQuota(
      { config: this.#config, quotas: this.#quotas },
      "mcp_servers_per_tenant",
      input.tenantId,
      () => this.repo.countOf(input.tenantId),
      () => this.repo.create(record),
      { tenantId: input.tenantId },
    );
    if (!created) throw new ServiceError("CONFLICT", `An MCP server named ${input.name} is already registered`);
    const connection = this.#attach(record);
    await this.repo.announce({ op: "added", tenantId: record.tenantId, name: record.name, from: this.#instance });
    await connection.connect();
    return view(connection);
  }

  /** Removes a tenant's server; another tenant's name answers exactly like a missing one. */
  async remove(tenantId: string, name: string): Promise<void> {
    const record = await this.repo.get(tenantId, name);
    if (!record) {
      if (await this.repo.get(null, name))
        throw new ServiceError("FORBIDDEN", `MCP server ${name} is shared by the operators; only they can remove it`);
      throw new ServiceError("NOT_FOUND", `No MCP server named ${name}`);
    }
    await this.repo.remove(tenantId, name);
    await this.#detach(tenantId, name);
    await this.repo.announce({ op: "removed", tenantId, name, from: this.#instance });
  }

  /** The tenant's servers and the shared ones, with this instance's view of their health. */
  async list(tenantId: string): Promise<UpstreamServerView[]> {
    const records = (await this.repo.list()).filter((record) => record.tenantId === tenantId || record.tenantId === null);
    return records
      .map((record) => {
        const connection = this.#connections.get(refOf(record.tenantId, record.name));
        return connection
          ? view(connection)
          : view(new UpstreamConnection(record, { timeoutMs: 0, maxRetries: 0, onChange: () => undefined, log: this.#log }));
      })
      .sort((a, b) => a.name.localeCompare(b.name) || Number(a.shared) - Number(b.shared));
  }

  /**
   * Health for the public `/bridge/health`: shared servers by name; tenants' servers only as
   * counts, so their names (and errors naming their URLs) stay with their tenant.
   */
  summary(): UpstreamSummary {
    const shared: UpstreamSummary["shared"] = [];
    const tenants = { total: 0, healthy: 0, unhealthy: 0 };
    for (const c of this.#connections.values()) {
      if (c.record.tenantId === null)
        shared.push({ name: c.record.name, health: c.health, toolCount: c.toolCount, lastError: c.lastError ?? null });
      else {
        tenants.total += 1;
        if (c.health === "healthy") tenants.healthy += 1;
        if (c.health === "unhealthy") tenants.unhealthy += 1;
      }
    }
    return { shared, tenants };
  }

  /** The server `name` in a scope: the tenant's own or a shared one (services: shared only). */
  find(scope: ToolScope, name: string): UpstreamServerHandle | undefined {
    if ("tenantId" in scope) return this.#connections.get(refOf(scope.tenantId, name)) ?? this.#connections.get(refOf(null, name));
    return this.#connections.get(refOf(null, name));
  }

  visible(scope: ToolScope): UpstreamServerHandle[] {
    const tenantId = "tenantId" in scope ? scope.tenantId : undefined;
    return [...this.#connections.values()]
      .filter((connection) => connection.record.tenantId === null || connection.record.tenantId === tenantId)
      .sort((a, b) => a.record.name.localeCompare(b.record.name));
  }

  /** An MCP session ended: its resource subscriptions and its own upstream sessions on every server end with it. */
  release(subscriber: string): void {
    for (const connection of this.#connections.values()) connection.release(subscriber);
  }

  /** An MCP client sent `notifications/roots/list_changed`: its upstream sessions are told. */
  rootsChanged(session: string): void {
    for (const connection of this.#connections.values()) connection.rootsChanged(session);
  }

  /** An MCP client's `logging/setLevel`, forwarded to its upstream sessions. */
  async setLevel(session: string, level: LoggingLevel): Promise<void> {
    await Promise.all([...this.#connections.values()].map((connection) => connection.setLevel(session, level)));
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
      throw new ServiceError("VALIDATION_FAILED", `Cannot resolve the MCP server's host: ${host}`, {
        details: { issues: [{ path: "url", message: "host does not resolve" }] },
      });
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#resync);
    this.#authorizations.close();
    await this.#unsubscribe?.().catch(() => undefined);
    await this.#unsubscribeAuthorizations?.().catch(() => undefined);
    const connections = [...this.#connections.values()];
    this.#connections.clear();
    await Promise.all(connections.map((connection) => connection.close()));
    this.#guard.close();
  }
}

function view(connection: UpstreamConnection): UpstreamServerView {
  const { record } = connection;
  return {
    name: record.name,
    url: record.url,
    category: record.category,
    headers: Object.keys(record.headers),
    shared: record.tenantId === null,
    health: connection.health,
    lastError: connection.lastError ?? null,
    toolCount: connection.toolCount,
    tools: connection.toolNames,
    connectedAt: connection.connectedAt ?? null,
    createdAt: record.createdAt,
  };
}
