import { Collection } from "../collection.js";
import type { Store } from "../store.js";
import { BusCache } from "../bus-cache.js";

/**
 * A verified key is served from memory for this long (docs/performance.md "Key cache"); every
 * change to a key (revocation, new limits or scopes, lastUsedAt) drops it on every instance
 * through the bus first.
 */
export const KEY_CACHE_MS = 5_000;

export type KeyKind = "gateway" | "platform" | "account";

/** One record per key, stored under its owner (a user, or a workspace for platform keys). */
export interface KeyRecord {
  id: string;
  kind: KeyKind;
  /** User id (gateway, account) or workspace id (platform). */
  owner: string;
  /** The user who created it. */
  userId: string;
  name: string;
  description?: string;
  /** SHA-256 of the plaintext; the plaintext itself is never stored. */
  hash: string;
  /**
   * The key's public id: the first 8 characters of its body, random and not secret (the secret
   * is the rest). Absent on records made before public ids.
   */
  publicId?: string;
  /**
   * Only on records made before public ids: the first characters of the secret, as they were
   * stored then (the key still works; new records never store any part of the secret).
   */
  hint?: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
  spendLimit: number | null;
  rpmLimit: number | null;
  tpmLimit: number | null;
  /** Model id patterns this key may use; absent or null: any (docs/access-control.md). */
  allowedModels?: string[] | null;
  /** Tool name patterns this key may list and call; absent or null: any. */
  allowedTools?: string[] | null;
}

interface HashEntry {
  owner: string;
  id: string;
}

/**
 * Keys under their owner (`keys:<owner>:<id>`, listed by owner: storage/layout.ts) with a
 * lookup by hash (`keyhash:<sha256>`). A key and its hash entry are written in one atomic
 * step; a revoked key stays readable by id but leaves its owner's listing.
 */
export class KeysRepo {
  readonly #indexes: Store["indexes"];
  readonly #keys: Collection<KeyRecord>;
  readonly #byHash: Collection<HashEntry>;
  /** Verified records by hash. */
  readonly #verified: BusCache<KeyRecord>;

  constructor(store: Store, options: { cacheMs?: number } = {}) {
    this.#indexes = store.indexes;
    this.#keys = new Collection<KeyRecord>(store, "keys");
    this.#byHash = new Collection<HashEntry>(store, "keyhash");
    this.#verified = new BusCache<KeyRecord>(store.bus, "keys.changed", { ttlMs: options.cacheMs ?? KEY_CACHE_MS });
  }

  async create(record: KeyRecord): Promise<KeyRecord> {
    // The record, its owner's index entry and its hash entry in one step.
    await this.#indexes.write([
      ...this.#keys.putChanges([record.owner, record.id], record),
      ...this.#byHash.putChanges([record.hash], { owner: record.owner, id: record.id }),
    ]);
    return record;
  }

  /** The live (unrevoked) key with this hash; from the short cache when it holds it. */
  findByHash(hash: string): Promise<KeyRecord | null> {
    return this.#verified.get(hash, () => this.#findByHash(hash));
  }

  async #findByHash(hash: string): Promise<KeyRecord | null> {
    const entry = await this.#byHash.get(hash);
    if (!entry) return null;
    const record = await this.#keys.get(entry.owner, entry.id);
    return record && record.hash === hash && !record.revokedAt ? record : null;
  }

  async get(owner: string, id: string): Promise<KeyRecord | null> {
    if (!Collection.validId(id)) return null;
    const record = await this.#keys.get(owner, id);
    return record && !record.revokedAt ? record : null;
  }

  async list(owner: string, kind?: KeyKind): Promise<KeyRecord[]> {
    const records = await this.#keys.list(owner);
    return records
      .filter((record) => !record.revokedAt && (!kind || record.kind === kind))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** A change to a live key (name, limits, lastUsedAt): its record only, it stays listed. */
  async update(record: KeyRecord): Promise<KeyRecord> {
    await this.#keys.replace([record.owner, record.id], record);
    await this.#verified.invalidate(record.hash);
    return record;
  }

  /**
   * Permanent: the hash entry goes, so the secret is refused from the next request on, and the
   * key leaves its owner's listing (its record stays, marked revoked), in one step.
   */
  async revoke(record: KeyRecord, at: string): Promise<void> {
    await this.#indexes.write([
      ...this.#byHash.removeChanges([record.hash]),
      ...this.#keys.putChanges([record.owner, record.id], { ...record, revokedAt: at }, { listed: false }),
    ]);
    await this.#verified.invalidate(record.hash);
  }

  /** Stops listening for changes (the store closes the bus itself). */
  close(): Promise<void> {
    return this.#verified.close();
  }
}
