import type { Bus } from "./bus.js";

export interface BusCacheOptions {
  /** How long an entry is served without asking storage again, ms. 0 turns the cache off. */
  ttlMs: number;
  /** Entries kept at most (the oldest go first). */
  maxEntries?: number;
}

/**
 * A short-lived read cache for records on the request path (a verified API key, a workspace's
 * status), shared by nothing but this process and kept honest across processes by the bus:
 * whoever changes a record calls `invalidate(id)`, which drops the entry here at once and
 * publishes the id on `channel`, so every other instance drops it as soon as the message
 * arrives (with Redis, before the change's own request has answered). Until the subscription
 * is live nothing is cached, and `ttlMs` bounds staleness if a message is ever lost.
 * Misses (no such record) are not cached: a record created elsewhere is found at once.
 */
export class BusCache<T> {
  readonly #bus: Bus;
  readonly #channel: string;
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #entries = new Map<string, { value: T; until: number }>();
  #live = false;
  #closed = false;
  /** Bumped by every invalidation: a load that overlapped one is not cached (it may predate it). */
  #epoch = 0;
  #unsubscribe: (() => Promise<void>) | undefined;

  constructor(bus: Bus, channel: string, options: BusCacheOptions) {
    this.#bus = bus;
    this.#channel = channel;
    this.#ttlMs = options.ttlMs;
    this.#max = options.maxEntries ?? 10_000;
    if (this.#ttlMs <= 0) return;
    bus
      .subscribe(channel, (message) => this.#dropOnMessage(message))
      .then((unsubscribe) => {
        if (this.#closed) return void unsubscribe().catch(() => undefined);
        this.#unsubscribe = unsubscribe;
        this.#live = true;
      })
      .catch(() => undefined);
  }

  /** The cached value of `id`, else `load()`'s (cached when it is not null). */
  async get(id: string, load: () => Promise<T | null>): Promise<T | null> {
    if (!this.#live) return load();
    const entry = this.#entries.get(id);
    if (entry) {
      if (entry.until > Date.now()) return entry.value;
      this.#entries.delete(id);
    }
    const epoch = this.#epoch;
    const value = await load();
    if (value !== null && this.#live && epoch === this.#epoch) {
      if (this.#entries.size >= this.#max) this.#entries.delete(this.#entries.keys().next().value!);
      this.#entries.set(id, { value, until: Date.now() + this.#ttlMs });
    }
    return value;
  }

  /** Drops `id` here and on every instance on the bus. Call after the change is stored. */
  async invalidate(id: string): Promise<void> {
    this.#epoch++;
    this.#entries.delete(id);
    if (this.#ttlMs > 0) await this.#bus.publish(this.#channel, { id });
  }

  #dropOnMessage(message: unknown): void {
    this.#epoch++;
    const id = (message as { id?: unknown } | null)?.id;
    if (typeof id === "string") this.#entries.delete(id);
    else this.#entries.clear();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#live = false;
    this.#entries.clear();
    await this.#unsubscribe?.().catch(() => undefined);
  }
}
