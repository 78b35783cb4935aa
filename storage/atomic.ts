import type { Storage } from "unstorage";

/**
 * Operations unstorage cannot make atomic. Never read-modify-write a shared value through
 * getItem/setItem: go through one of these, which is atomic within a process (local) or
 * across every process on one Redis (redis).
 */
export interface Atomic {
  /** Adds `by` to a counter that expires `ttlMs` after its first increment. */
  increment(key: string, by: number, ttlMs: number): Promise<{ value: number; ttlMs: number }>;
  /** Current value of a counter (0 when absent or expired). */
  counter(key: string): Promise<number>;
  /** Sets `key` only when it is absent. True when this call set it. */
  setIfAbsent(key: string, value: string, ttlMs?: number): Promise<boolean>;
  get(key: string): Promise<string | null>;
  delete(key: string): Promise<void>;
  /** Replaces the value when it equals `expected` (null: absent); `next` null deletes. */
  compareAndSet(key: string, expected: string | null, next: string | null, ttlMs?: number): Promise<boolean>;
  /** Adds `delta` (may be negative) to an integer balance; returns the new balance. */
  adjust(key: string, delta: number): Promise<number>;
  /** Subtracts `amount` only if the balance stays at or above `floor`. */
  debit(key: string, amount: number, floor?: number): Promise<{ ok: boolean; balance: number }>;
  /** Reads an integer balance (0 when absent). */
  balance(key: string): Promise<number>;
}

interface Durable {
  v: string;
  exp?: number;
}

/**
 * In-process implementation for the memory and fs drivers. Durable values (claims,
 * balances) live in the unstorage instance, so with fs they survive a restart; each key is
 * serialized through its own promise chain. Expiring counters are rate windows and live in
 * memory only.
 */
export class LocalAtomic implements Atomic {
  readonly #kv: Storage;
  readonly #counters = new Map<string, { value: number; expiresAt: number }>();
  readonly #locks = new Map<string, Promise<unknown>>();

  constructor(kv: Storage) {
    this.#kv = kv;
  }

  async increment(key: string, by: number, ttlMs: number) {
    const now = Date.now();
    let entry = this.#counters.get(key);
    if (!entry || entry.expiresAt <= now) {
      entry = { value: 0, expiresAt: now + ttlMs };
      this.#counters.set(key, entry);
      this.#sweep(now);
    }
    entry.value += by;
    return { value: entry.value, ttlMs: entry.expiresAt - now };
  }

  async counter(key: string) {
    const entry = this.#counters.get(key);
    return entry && entry.expiresAt > Date.now() ? entry.value : 0;
  }

  setIfAbsent(key: string, value: string, ttlMs?: number) {
    return this.#locked(key, async () => {
      if ((await this.#read(key)) !== null) return false;
      await this.#write(key, value, ttlMs);
      return true;
    });
  }

  get(key: string) {
    return this.#read(key);
  }

  delete(key: string) {
    return this.#locked(key, () => this.#kv.removeItem(this.#path(key)));
  }

  compareAndSet(key: string, expected: string | null, next: string | null, ttlMs?: number) {
    return this.#locked(key, async () => {
      if ((await this.#read(key)) !== expected) return false;
      if (next === null) await this.#kv.removeItem(this.#path(key));
      else await this.#write(key, next, ttlMs);
      return true;
    });
  }

  adjust(key: string, delta: number) {
    return this.#locked(key, async () => {
      const balance = Number((await this.#read(key)) ?? 0) + delta;
      await this.#write(key, String(balance));
      return balance;
    });
  }

  debit(key: string, amount: number, floor = 0) {
    return this.#locked(key, async () => {
      const current = Number((await this.#read(key)) ?? 0);
      if (current - amount < floor) return { ok: false, balance: current };
      await this.#write(key, String(current - amount));
      return { ok: true, balance: current - amount };
    });
  }

  async balance(key: string) {
    return Number((await this.#read(key)) ?? 0);
  }

  #path(key: string) {
    return `atomic:${key}`;
  }

  async #read(key: string): Promise<string | null> {
    const item = (await this.#kv.getItem(this.#path(key))) as Durable | null;
    if (!item) return null;
    if (item.exp !== undefined && item.exp <= Date.now()) return null;
    return item.v;
  }

  #write(key: string, value: string, ttlMs?: number) {
    const item: Durable = ttlMs ? { v: value, exp: Date.now() + ttlMs } : { v: value };
    return this.#kv.setItem(this.#path(key), item);
  }

  #locked<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(key) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const settled = run.catch(() => undefined);
    this.#locks.set(key, settled);
    void settled.then(() => {
      if (this.#locks.get(key) === settled) this.#locks.delete(key);
    });
    return run;
  }

  #sweep(now: number) {
    if (this.#counters.size < 10_000) return;
    for (const [key, entry] of this.#counters) if (entry.expiresAt <= now) this.#counters.delete(key);
  }
}
