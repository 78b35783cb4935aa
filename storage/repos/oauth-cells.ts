import type { Atomic } from "../atomic.js";

/**
 * JSON values at keys of the atomic store, with an expiry, changed only by compare-and-set:
 * the authorization server's records are written by every instance on one Redis at once
 * (docs/mcp.md "Authorization server"), so a read-modify-write must not lose a concurrent one.
 */
export class JsonCells {
  readonly #atomic: Atomic;

  constructor(atomic: Atomic) {
    this.#atomic = atomic;
  }

  async get<T>(key: string): Promise<T | undefined> {
    const raw = await this.#atomic.get(key);
    return raw === null ? undefined : (JSON.parse(raw) as T);
  }

  /** Writes `value` whatever is there; `ttlMs` undefined keeps it until deleted. */
  async put(key: string, value: unknown, ttlMs?: number): Promise<void> {
    const next = JSON.stringify(value);
    for (;;) {
      const current = await this.#atomic.get(key);
      if (await this.#atomic.compareAndSet(key, current, next, ttlMs)) return;
    }
  }

  /** Writes `value` only when the key is absent; true when this call wrote it. */
  create(key: string, value: unknown, ttlMs?: number): Promise<boolean> {
    return this.#atomic.setIfAbsent(key, JSON.stringify(value), ttlMs);
  }

  /**
   * Changes the value by `change`, retried until no other writer came in between. `change`
   * returns the next value (with its time to live) or `undefined` to leave the value as it is;
   * `null` deletes it. Resolves to what was written (or found, when nothing was).
   */
  async update<T>(
    key: string,
    change: (current: T | undefined) => { value: T | null; ttlMs?: number } | undefined,
  ): Promise<T | undefined> {
    for (;;) {
      const raw = await this.#atomic.get(key);
      const current = raw === null ? undefined : (JSON.parse(raw) as T);
      const next = change(current);
      if (next === undefined) return current;
      if (next.ttlMs !== undefined && next.ttlMs <= 0) next.value = null;
      const written = next.value === null ? null : JSON.stringify(next.value);
      if (await this.#atomic.compareAndSet(key, raw, written, next.ttlMs)) return next.value ?? undefined;
    }
  }

  delete(key: string): Promise<void> {
    return this.#atomic.delete(key);
  }
}
