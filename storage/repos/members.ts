import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Collection } from "../collection.js";
import type { Store } from "../store.js";

/** The roles of a tenant's members, weakest first (docs/tenants.md "Roles"). */
export const ROLES = ["viewer", "member", "admin", "owner"] as const;
export type Role = (typeof ROLES)[number];

export interface Membership {
  tenantId: string;
  userId: string;
  role: Role;
  addedBy: string;
  addedAt: string;
  updatedAt: string;
}

/** A tenant's member lock is a lease: a process killed while holding it frees it after this. */
const LOCK_MS = 10_000;

/**
 * Who belongs to which tenant, with what role: `members:<tenantId>:<userId>` (the tenant's
 * list) and `member-of:<userId>:<tenantId>` (the user's tenants), both listed by their
 * first part (storage/layout.ts) and written together in one step.
 *
 * Tenants made before roles existed have no records: their creator (`Tenant.ownerId`) is
 * their owner until the first change to the tenant's members writes that record (`seed`).
 */
export class MembersRepo {
  readonly #members: Collection<Membership>;
  readonly #index: Collection<{ tenantId: string }>;
  readonly #atomic: Store["atomic"];
  readonly #indexes: Store["indexes"];

  constructor(store: Store) {
    this.#atomic = store.atomic;
    this.#indexes = store.indexes;
    this.#members = new Collection<Membership>(store, "members");
    this.#index = new Collection<{ tenantId: string }>(store, "member-of");
  }

  get(tenantId: string, userId: string): Promise<Membership | null> {
    if (!Collection.validId(tenantId) || !Collection.validId(userId)) return Promise.resolve(null);
    return this.#members.get(tenantId, userId);
  }

  async list(tenantId: string): Promise<Membership[]> {
    if (!Collection.validId(tenantId)) return [];
    return (await this.#members.list(tenantId)).sort((a, b) => a.addedAt.localeCompare(b.addedAt) || a.userId.localeCompare(b.userId));
  }

  /** The membership and the user's entry, in one step. */
  async put(membership: Membership): Promise<Membership> {
    await this.#indexes.write([
      ...this.#index.putChanges([membership.userId, membership.tenantId], { tenantId: membership.tenantId }),
      ...this.#members.putChanges([membership.tenantId, membership.userId], membership),
    ]);
    return membership;
  }

  async remove(tenantId: string, userId: string): Promise<void> {
    await this.#indexes.write([...this.#members.removeChanges([tenantId, userId]), ...this.#index.removeChanges([userId, tenantId])]);
  }

  /** Tenants the user has a membership record in (any role). */
  async tenantIdsOf(userId: string): Promise<string[]> {
    if (!Collection.validId(userId)) return [];
    return (await this.#index.list(userId)).map((entry) => entry.tenantId);
  }

  /** True once the tenant's creator has a record (or was removed after having one). */
  async seeded(tenantId: string): Promise<boolean> {
    return (await this.#atomic.get(`members-seeded:${tenantId}`)) !== null;
  }

  /** Writes the creator's owner record of a tenant made before roles, once. */
  async seed(tenantId: string, creatorId: string, at: string): Promise<void> {
    if (await this.seeded(tenantId)) return;
    if (!(await this.get(tenantId, creatorId))) {
      await this.put({ tenantId, userId: creatorId, role: "owner", addedBy: creatorId, addedAt: at, updatedAt: at });
    }
    await this.#atomic.setIfAbsent(`members-seeded:${tenantId}`, "1");
  }

  /**
   * Runs `fn` as the only writer of the tenant's members on every instance (the last-owner
   * rule reads the owners and writes under it): a claim with a lease of LOCK_MS.
   */
  async withLock<T>(tenantId: string, fn: () => Promise<T>): Promise<T> {
    const key = `tenant-members-lock:${tenantId}`;
    const token = randomBytes(9).toString("base64url");
    const deadline = Date.now() + LOCK_MS * 2;
    while (!(await this.#atomic.setIfAbsent(key, token, LOCK_MS))) {
      if (Date.now() > deadline) throw new Error(`The members of tenant ${tenantId} stayed locked`);
      await sleep(3 + Math.random() * 12);
    }
    try {
      return await fn();
    } finally {
      await this.#atomic.compareAndSet(key, token, null).catch(() => undefined);
    }
  }
}
