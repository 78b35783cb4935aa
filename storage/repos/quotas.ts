import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { PlaceClaim, PlacesClaim, PlaceRenewal } from "../atomic.js";
import type { Store } from "../store.js";

/** A quota's lock is a lease: a process killed while holding it frees it after this. */
const LOCK_MS = 10_000;

/**
 * What the quotas keep (docs/quotas.md), shared by every instance on one Redis:
 * - **locks** (`quota-lock:<quota>:<scope>`), under which a count of records is read and one
 *   more written, so two instances can never both take the last place of a counted quota
 *   (keys per user, MCP servers and webhook subscriptions per tenant);
 * - **sets of places** (`quota-places:<quota>:<scope>`), for what lives only while a process
 *   serves it (VM sockets and the tools they announce, streams in flight): each place has a
 *   lease its process renews, so the places of a process that died end with their lease.
 */
export class QuotasRepo {
  readonly #atomic: Store["atomic"];

  constructor(store: Store) {
    this.#atomic = store.atomic;
  }

  #places(quota: string, scope: string): string {
    return `quota-places:${quota}:${scope}`;
  }

  /**
   * Runs `fn` as the only writer of `quota` for `scope` on every instance: a claim with a
   * lease of LOCK_MS. Waiters poll every few milliseconds.
   */
  async withLock<T>(quota: string, scope: string, fn: () => Promise<T>): Promise<T> {
    const key = `quota-lock:${quota}:${scope}`;
    const token = randomBytes(9).toString("base64url");
    const deadline = Date.now() + LOCK_MS * 2;
    while (!(await this.#atomic.setIfAbsent(key, token, LOCK_MS))) {
      if (Date.now() > deadline) throw new Error(`The ${quota} quota of ${scope} stayed locked`);
      await sleep(3 + Math.random() * 12);
    }
    try {
      return await fn();
    } finally {
      await this.#atomic.compareAndSet(key, token, null).catch(() => undefined);
    }
  }

  /** Takes (or keeps) `holder`'s place of `weight` within `limit` (storage/atomic.ts claimPlace). */
  claim(quota: string, scope: string, place: PlaceRenewal, limit: number, leaseMs: number): Promise<PlaceClaim> {
    return this.#atomic.claimPlace(this.#places(quota, scope), place.holder, place.token, place.weight, limit, leaseMs);
  }

  /** Takes `place` in every one of these quotas' sets within its limit, or in none (storage/atomic.ts claimPlaces). */
  claimAll(sets: readonly { quota: string; scope: string; limit: number }[], place: PlaceRenewal, leaseMs: number): Promise<PlacesClaim> {
    return this.#atomic.claimPlaces(
      sets.map(({ quota, scope, limit }) => ({ key: this.#places(quota, scope), limit })),
      place.holder,
      place.token,
      place.weight,
      leaseMs,
    );
  }

  /** Gives the place back while `token` still owns it. */
  release(quota: string, scope: string, holder: string, token: string): Promise<void> {
    return this.#atomic.releasePlace(this.#places(quota, scope), holder, token);
  }

  /** Renews the leases of these places (a heartbeat, a stream still in flight). */
  renew(quota: string, scope: string, places: PlaceRenewal[], leaseMs: number): Promise<void> {
    return this.#atomic.renewPlaces(this.#places(quota, scope), places, leaseMs);
  }

  /** The live places of `scope`: their summed weight and how many holders. */
  count(quota: string, scope: string): Promise<{ weight: number; holders: number }> {
    return this.#atomic.places(this.#places(quota, scope));
  }
}
