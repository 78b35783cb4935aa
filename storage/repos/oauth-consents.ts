import type { Atomic } from "../atomic.js";
import { sha256Hex } from "../ids.js";
import { JsonCells } from "./oauth-cells.js";

/** How a client came to be known to the authorization server (docs/mcp.md "Clients"). */
export type ClientRegistration = "metadata-document" | "dynamic" | "operator";

/**
 * An authorization a user gave a client (docs/mcp.md "Consents"): the grant the authorization
 * server issues its tokens under, with the tenant those tokens reach. Its id is the grant's.
 */
export interface OAuthConsent {
  id: string;
  userId: string;
  tenantId: string;
  clientId: string;
  clientName: string;
  registration: ClientRegistration;
  /** The resource (RFC 8707) the tokens are for: the canonical URL of /bridge/mcp or /bridge/mcp/servers/{name}. */
  resource: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string;
}

/** A user's answer on the consent page (docs/mcp.md "Sign-in and consent"). */
export interface AuthorizationDecision {
  userId: string;
  approve: boolean;
  tenantId?: string;
  scopes?: string[];
  /** SHA-256 of the nonce handed to the browser that decided; only that browser can apply the decision. */
  nonceHash: string;
  decidedAt: string;
}

/** An authorization request waiting on the consent page, as the page shows it. */
export interface PendingAuthorization {
  uid: string;
  clientId: string;
  clientName: string;
  clientUri?: string;
  logoUri?: string;
  registration: ClientRegistration;
  applicationType: "web" | "native";
  redirectUri: string;
  /** The resource in canonical form (docs/mcp.md "Resource indicators"). */
  resource: string;
  /** The resource indicator as the client sent it (the grant is keyed by it). */
  requestedResource?: string;
  /** The MCP scopes asked for. */
  scopes: string[];
  /** OpenID Connect scopes asked for (`openid`, `offline_access`), granted with the consent. */
  oidcScopes?: string[];
  /** Where the browser resumes the authorization request once decided (the authorization server's resume URL). */
  returnTo: string;
  createdAt: string;
  expiresAt: string;
  /** The signed-in user who opened it first: nobody else sees it (same 404 as a missing one). */
  viewer?: string;
  decision?: AuthorizationDecision;
  /** The decision reached the authorization server (once). */
  applied?: boolean;
}

/**
 * Consents and the authorization requests waiting for one, shared by every instance. A user's
 * consents are listed through an index of their ids; a consent that expired or was revoked
 * drops out of it when next listed.
 */
export class OAuthConsentsRepo {
  readonly #cells: JsonCells;

  constructor(atomic: Atomic) {
    this.#cells = new JsonCells(atomic);
  }

  #consentKey(id: string): string {
    return `oauth:consent:${sha256Hex(id)}`;
  }

  #indexKey(userId: string): string {
    return `oauth:user-consents:${userId}`;
  }

  #pendingKey(uid: string): string {
    return `oauth:pending:${sha256Hex(uid)}`;
  }

  async putConsent(consent: OAuthConsent): Promise<void> {
    const ttlMs = Date.parse(consent.expiresAt) - Date.now();
    await this.#cells.put(this.#consentKey(consent.id), consent, ttlMs);
    await this.#cells.update<string[]>(this.#indexKey(consent.userId), (ids = []) =>
      ids.includes(consent.id) ? undefined : { value: [...ids, consent.id] },
    );
  }

  getConsent(id: string): Promise<OAuthConsent | undefined> {
    return this.#cells.get<OAuthConsent>(this.#consentKey(id));
  }

  /** The user's live consents, oldest first. */
  async listConsents(userId: string): Promise<OAuthConsent[]> {
    const ids = (await this.#cells.get<string[]>(this.#indexKey(userId))) ?? [];
    const found = await Promise.all(ids.map((id) => this.getConsent(id)));
    const live = found.filter((consent): consent is OAuthConsent => consent !== undefined && consent.userId === userId);
    if (live.length !== ids.length) {
      const keep = new Set(live.map((consent) => consent.id));
      await this.#cells.update<string[]>(this.#indexKey(userId), (current = []) => {
        const next = current.filter((id) => keep.has(id) || !ids.includes(id));
        return next.length === current.length ? undefined : { value: next };
      });
    }
    return live.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async deleteConsent(consent: Pick<OAuthConsent, "id" | "userId">): Promise<void> {
    await this.#cells.delete(this.#consentKey(consent.id));
    await this.#cells.update<string[]>(this.#indexKey(consent.userId), (ids = []) =>
      ids.includes(consent.id) ? { value: ids.filter((id) => id !== consent.id) } : undefined,
    );
  }

  async putPending(pending: PendingAuthorization): Promise<void> {
    await this.#cells.put(this.#pendingKey(pending.uid), pending, Date.parse(pending.expiresAt) - Date.now());
  }

  getPending(uid: string): Promise<PendingAuthorization | undefined> {
    return this.#cells.get<PendingAuthorization>(this.#pendingKey(uid));
  }

  /**
   * The pending authorization for this signed-in user: the first user to open it becomes its
   * viewer; anyone else gets undefined, as for one that does not exist.
   */
  async viewPending(uid: string, userId: string): Promise<PendingAuthorization | undefined> {
    const seen = await this.#cells.update<PendingAuthorization>(this.#pendingKey(uid), (current) => {
      if (!current || current.viewer !== undefined) return undefined;
      return { value: { ...current, viewer: userId }, ttlMs: Date.parse(current.expiresAt) - Date.now() };
    });
    return seen?.viewer === userId ? seen : undefined;
  }

  /** Records the viewer's decision, once: false when it is not theirs, was decided already, or is gone. */
  async decide(uid: string, decision: AuthorizationDecision): Promise<boolean> {
    let decided = false;
    await this.#cells.update<PendingAuthorization>(this.#pendingKey(uid), (current) => {
      decided = false;
      if (!current || current.viewer !== decision.userId || current.decision) return undefined;
      decided = true;
      return { value: { ...current, decision }, ttlMs: Date.parse(current.expiresAt) - Date.now() };
    });
    return decided;
  }

  /**
   * Takes the decision for the browser holding its nonce, once (a second attempt, or another
   * nonce, gets undefined): the authorization server applies it exactly once.
   */
  async takeDecision(uid: string, nonceHash: string): Promise<PendingAuthorization | undefined> {
    let taken: PendingAuthorization | undefined;
    await this.#cells.update<PendingAuthorization>(this.#pendingKey(uid), (current) => {
      taken = undefined;
      if (!current?.decision || current.applied || current.decision.nonceHash !== nonceHash) return undefined;
      taken = { ...current, applied: true };
      return { value: taken, ttlMs: Date.parse(current.expiresAt) - Date.now() };
    });
    return taken;
  }
}
