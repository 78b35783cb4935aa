import { randomUUID } from "node:crypto";
import type { Logger } from "../../rpc/log.js";
import type { GuardedFetch } from "../../rpc/outbound/guarded-fetch.js";
import { refreshUpstreamAuthorization } from "../../rpc/tools/upstream-oauth.js";
import type { UpstreamOAuthRepo } from "../../storage/repos/upstream-oauth.js";
import type { UpstreamConnection } from "./connection.js";

/** Refreshed this long before the access token expires. */
const REFRESH_AHEAD_MS = 60_000;
/** One instance refreshes at a time; its lease ends after this if it dies mid-refresh. */
const REFRESH_LEASE_MS = 30_000;
/** A refused token is refreshed at most this often per connection. */
const REFUSED_RETRY_MS = 10_000;
/** While another instance holds the lease, look again after this. */
const LEASE_RETRY_MS = 2_000;

/**
 * The gateway's OAuth authorizations at upstream servers, applied to their connections (docs/mcp.md
 * "Upstream servers that need OAuth"): the access token goes out as the server's `Authorization`
 * (over a static one), never anything a client presented; it is refreshed a minute before it
 * expires or when the server refuses it, by one instance at a time (a lease in storage), which
 * then tells the others through the bus.
 */
export class UpstreamAuthorizations {
  readonly #repo: UpstreamOAuthRepo;
  readonly #fetch: GuardedFetch;
  readonly #log: Logger;

  readonly #timers = new Map<UpstreamConnection, NodeJS.Timeout>();
  /** When each connection last had a refused token refreshed. */
  readonly #refused = new WeakMap<UpstreamConnection, number>();
  #closed = false;

  constructor(deps: { repo: UpstreamOAuthRepo; fetch: GuardedFetch; log: Logger }) {
    this.#repo = deps.repo;
    this.#fetch = deps.fetch;
    this.#log = deps.log;
  }

  /** Puts the stored authorization (if any) on the connection's headers; true when they changed. */
  async apply(connection: UpstreamConnection): Promise<boolean> {
    const { tenantId, name } = connection.record;
    if (tenantId === null || this.#closed) return false;
    const authorization = await this.#repo.get(tenantId, name);
    const headers = connection.outgoingHeaders;
    // RFC 6750: the scheme is Bearer whatever case the token response spelled its type in.
    // Without one, the static Authorization of the registration (if any) is sent again.
    const wanted = authorization ? `Bearer ${authorization.tokens.access_token}` : headerOf(connection.record.headers);
    const changed = headerOf(headers) !== wanted;
    setHeader(headers, wanted);
    clearTimeout(this.#timers.get(connection));
    this.#timers.delete(connection);
    const expiresAt = authorization?.tokens.expiresAt;
    if (authorization?.tokens.refresh_token && expiresAt !== undefined) {
      const timer = setTimeout(() => void this.refresh(connection), Math.max(1000, expiresAt - REFRESH_AHEAD_MS - Date.now()));
      timer.unref();
      this.#timers.set(connection, timer);
    }
    return changed;
  }

  /**
   * Refreshes the connection's authorization under the lease, stores and announces it, and
   * reconnects with it. Another instance holding the lease does it instead (this one looks again
   * shortly, and hears of the result on the bus).
   */
  async refresh(connection: UpstreamConnection): Promise<void> {
    const { tenantId, name } = connection.record;
    if (tenantId === null || this.#closed) return;
    const holder = randomUUID();
    if (!(await this.#repo.leaseRefresh(tenantId, name, holder, REFRESH_LEASE_MS))) {
      const timer = setTimeout(() => void this.#reapply(connection), LEASE_RETRY_MS);
      timer.unref();
      return;
    }
    try {
      const authorization = await this.#repo.get(tenantId, name);
      if (!authorization) return;
      const fresh = authorization.tokens.expiresAt === undefined || authorization.tokens.expiresAt - Date.now() > 2 * REFRESH_AHEAD_MS;
      const newer = !headerOf(connection.outgoingHeaders)?.endsWith(authorization.tokens.access_token);
      // Refreshed meanwhile by another instance: use what it stored rather than rotate again.
      if (!(fresh && newer)) {
        const tokens = await refreshUpstreamAuthorization(authorization, this.#fetch);
        if (!tokens) {
          this.#log.warn({ event: "mcp.server.authorization_expired", tenantId, name, reason: "no refresh token" });
          return;
        }
        await this.#repo.put(tenantId, name, { ...authorization, tokens, refreshedAt: new Date().toISOString() });
        await this.#repo.announce({ tenantId, server: name });
      }
      if (await this.apply(connection)) await connection.connect();
    } catch (error) {
      this.#log.warn({ event: "mcp.server.authorization_refresh_failed", tenantId, name, error: (error as Error).message });
    } finally {
      await this.#repo.releaseRefresh(tenantId, name, holder).catch(() => false);
    }
  }

  /** Applies what is stored now, reconnecting when it changed the headers. */
  async #reapply(connection: UpstreamConnection): Promise<void> {
    if (await this.apply(connection)) await connection.connect();
  }

  /** A connection attempt failed: when the server refused its token, the token is refreshed and the connection retried. */
  unhealthy(connection: UpstreamConnection, lastError: string | null): void {
    const { tenantId, name } = connection.record;
    if (tenantId === null || !lastError || !/^HTTP 401\b/.test(lastError)) return;
    void this.#repo.get(tenantId, name).then((authorization) => {
      if (!authorization?.tokens.refresh_token) return;
      // At most one attempt per connection every REFUSED_RETRY_MS: a token the server keeps refusing is not refreshed in a loop.
      const now = Date.now();
      if (now - (this.#refused.get(connection) ?? 0) < REFUSED_RETRY_MS) return;
      this.#refused.set(connection, now);
      return this.refresh(connection);
    });
  }

  /** Forgets a connection that went away. */
  forget(connection: UpstreamConnection): void {
    clearTimeout(this.#timers.get(connection));
    this.#timers.delete(connection);
  }

  close(): void {
    this.#closed = true;
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
  }
}

/** The `Authorization` header's value, whatever case its name is in. */
function headerOf(headers: Record<string, string>): string | undefined {
  for (const [name, value] of Object.entries(headers)) if (name.toLowerCase() === "authorization") return value;
  return undefined;
}

/** Sets (or, with undefined, removes) the one `Authorization` header, in place: the connection reads this object on every request. */
function setHeader(headers: Record<string, string>, value: string | undefined): void {
  for (const name of Object.keys(headers)) if (name.toLowerCase() === "authorization") delete headers[name];
  if (value !== undefined) headers.Authorization = value;
}
