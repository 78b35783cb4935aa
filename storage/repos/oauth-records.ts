import type { Atomic } from "../atomic.js";
import { sha256Hex } from "../ids.js";
import type { SecretBox } from "../secret-box.js";
import { JsonCells } from "./oauth-cells.js";

/** One record of the authorization server (oidc-provider's model payload: a grant, a code, a refresh token, a client…). */
export type OAuthPayload = Record<string, unknown> & {
  jti?: string;
  grantId?: string;
  uid?: string;
  /** Seconds since the epoch when the record was used up (a code exchanged, a refresh token rotated). */
  consumed?: number;
  /** Seconds since the epoch when the record expires. */
  exp?: number;
};

/** What is stored: the payload without its own id, secrets sealed. */
interface Stored {
  p: OAuthPayload;
  /** The payload's `jti` was its id and is given back from the id asked for. */
  j?: 1;
}

const OPERATOR_CLIENTS = "oauth:operator-clients";

/** Client metadata holding a secret: sealed at rest (docs/mcp.md "What is stored"). */
const SECRET_FIELDS = ["client_secret"] as const;

/**
 * The authorization server's state (docs/mcp.md "Authorization server"), for every instance on
 * one store: clients, grants, sessions, interactions, authorization codes, refresh tokens.
 *
 * - Records are keyed by the SHA-256 of their id and stored without it: an authorization code,
 *   a refresh token or a session cookie is the id of its record, so what is stored is never a
 *   usable credential (a dump of Redis or of DATA_DIR holds no token).
 * - A client's secret is sealed with DATA_ENCRYPTION_SECRET (storage/secret-box.ts).
 * - `consume` is one compare-and-set: of several instances redeeming one code (or rotating one
 *   refresh token) at once, exactly one succeeds.
 * - A revoked grant is remembered (`revokeGrant`): every record of that grant reads as absent
 *   from then on, on every instance, without finding and deleting each one.
 */
export class OAuthRecordsRepo {
  readonly #cells: JsonCells;
  readonly #box: SecretBox;
  readonly #grantMemoryMs: number;

  /** `grantMemoryMs`: how long a revoked grant is remembered, at least the longest life of one of its tokens. */
  constructor(atomic: Atomic, box: SecretBox, options: { grantMemoryMs: number }) {
    this.#cells = new JsonCells(atomic);
    this.#box = box;
    this.#grantMemoryMs = options.grantMemoryMs;
  }

  #key(model: string, id: string): string {
    return `oauth:${model}:${sha256Hex(id)}`;
  }

  #uidKey(model: string, uid: string): string {
    return `oauth:${model}-uid:${sha256Hex(uid)}`;
  }

  #revokedKey(grantId: string): string {
    return `oauth:revoked-grant:${sha256Hex(grantId)}`;
  }

  async find(model: string, id: string): Promise<OAuthPayload | undefined> {
    const stored = await this.#cells.get<Stored>(this.#key(model, id));
    if (!stored) return undefined;
    if (typeof stored.p.grantId === "string" && (await this.isGrantRevoked(stored.p.grantId))) return undefined;
    return this.#open(id, stored);
  }

  /** Writes a record; `expiresInSeconds` undefined keeps it until destroyed (a pre-registered client). */
  async upsert(model: string, id: string, payload: OAuthPayload, expiresInSeconds?: number): Promise<void> {
    const ttlMs = expiresInSeconds === undefined ? undefined : Math.max(1, expiresInSeconds) * 1000;
    await this.#cells.put(this.#key(model, id), this.#seal(id, payload), ttlMs);
    if (typeof payload.uid === "string") await this.#cells.put(this.#uidKey(model, payload.uid), this.#box.seal(id), ttlMs);
  }

  /** The record whose `uid` is this (a session by its public uid). */
  async findByUid(model: string, uid: string): Promise<OAuthPayload | undefined> {
    const sealedId = await this.#cells.get<string>(this.#uidKey(model, uid));
    if (sealedId === undefined) return undefined;
    return this.find(model, this.#box.open(sealedId));
  }

  /**
   * Marks the record used up. True when this call did; false when it was used up already (by
   * a concurrent request on any instance) or is gone.
   */
  async consume(model: string, id: string): Promise<boolean> {
    let consumed = false;
    await this.#cells.update<Stored>(this.#key(model, id), (current) => {
      consumed = false;
      if (!current || current.p.consumed !== undefined) return undefined;
      consumed = true;
      return { value: { ...current, p: { ...current.p, consumed: Math.floor(Date.now() / 1000) } }, ttlMs: ttlOf(current.p) };
    });
    return consumed;
  }

  async destroy(model: string, id: string): Promise<void> {
    await this.#cells.delete(this.#key(model, id));
  }

  /**
   * Revokes a grant everywhere: the grant record goes, and every code, refresh token and
   * session entry of it reads as absent from now on (on every instance sharing the store).
   */
  async revokeGrant(grantId: string): Promise<void> {
    await this.#cells.put(this.#revokedKey(grantId), 1, this.#grantMemoryMs);
    await this.destroy("Grant", grantId);
  }

  async isGrantRevoked(grantId: string): Promise<boolean> {
    return (await this.#cells.get(this.#revokedKey(grantId))) !== undefined;
  }

  /** The ids of the clients operators registered (npm run admin -- add-oauth-client), oldest first. */
  async operatorClientIds(): Promise<string[]> {
    return (await this.#cells.get<string[]>(OPERATOR_CLIENTS)) ?? [];
  }

  /** Adds or removes a client id from the operators' list. */
  async markOperatorClient(clientId: string, registered: boolean): Promise<void> {
    await this.#cells.update<string[]>(OPERATOR_CLIENTS, (ids = []) => {
      if (registered === ids.includes(clientId)) return undefined;
      return { value: registered ? [...ids, clientId] : ids.filter((id) => id !== clientId) };
    });
  }

  #seal(id: string, payload: OAuthPayload): Stored {
    const p: OAuthPayload = { ...payload };
    let j: 1 | undefined;
    if (p.jti === id) {
      delete p.jti;
      j = 1;
    }
    for (const field of SECRET_FIELDS) {
      const value = p[field];
      if (typeof value === "string") p[field] = this.#box.seal(value);
    }
    return j ? { p, j } : { p };
  }

  #open(id: string, stored: Stored): OAuthPayload {
    const p: OAuthPayload = { ...stored.p };
    for (const field of SECRET_FIELDS) {
      const value = p[field];
      if (typeof value === "string") p[field] = this.#box.openOrPlain(value);
    }
    return stored.j ? { ...p, jti: id } : p;
  }
}

/** What is left of a record's life, from its `exp` (undefined: it has none). */
function ttlOf(payload: OAuthPayload): number | undefined {
  return typeof payload.exp === "number" ? Math.max(1, payload.exp * 1000 - Date.now()) : undefined;
}
