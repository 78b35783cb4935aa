import type { Storage } from "unstorage";

/**
 * One account of a hold (the ledger, DESIGN "Money"). An account is an integer value at a
 * key plus the holds placed on it:
 * - `balance` accounts hold what is left (workspace credits): a hold is admitted while
 *   `value − held − amount ≥ limit` (limit defaults to 0);
 * - `usage` accounts count what was used (a key's spend, tokens per minute, a plan's
 *   allowance, a tenant's month): admitted while `value + held + amount ≤ limit`; without a
 *   limit the hold is still recorded, so a later limit sees the requests in flight.
 */
export interface HoldLine {
  key: string;
  kind: "balance" | "usage";
  /** What the request may cost at most on this account (integer ≥ 0). */
  amount: number;
  limit?: number;
  /** A usage counted in a window of this length that starts when the account is first touched. */
  windowMs?: number;
  /** Counted into the value at once rather than held (a requests-per-minute counter). */
  commit?: boolean;
}

/** Why a hold was refused: the first line that did not fit, and that account's state. */
export interface HoldRefusal {
  index: number;
  value: number;
  held: number;
  /** Time left in the line's window (0 without one). */
  ttlMs: number;
}

/** Ends a hold on one account: its amount is released and `delta` added to the value. */
export interface SettleLine {
  key: string;
  /** Added to the value: negative for a balance (the cost), positive for a usage. */
  delta: number;
  windowMs?: number;
}

export interface AccountState {
  value: number;
  held: number;
  ttlMs: number;
}

/**
 * Operations unstorage cannot make atomic. Never read-modify-write a shared value through
 * getItem/setItem: go through one of these, which is atomic within the process that owns the
 * data (memory; fs, where one process owns DATA_DIR and the admin command goes through it) or
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
  /**
   * Places hold `id` on every line at once, or on none: null when admitted, else the first
   * line that did not fit. Expired holds of those accounts are released first (the lease of a
   * process that died). One atomic step (one round trip on Redis).
   */
  hold(id: string, lines: HoldLine[], leaseMs: number): Promise<HoldRefusal | null>;
  /**
   * Ends hold `id` on every line at once: releases what is still held and adds each delta.
   * A hold that already expired is not released twice; the delta is still applied (usage
   * that happened is counted). One atomic step.
   */
  settle(id: string, lines: SettleLine[]): Promise<void>;
  /** Pushes the lease of hold `id` on these accounts to `leaseMs` from now (long requests). */
  renew(id: string, keys: string[], leaseMs: number): Promise<void>;
  /** An account's value, what is held on it (live holds only) and its window's time left. */
  account(key: string): Promise<AccountState>;
}

/**
 * What LocalAtomic stores per key: the value, its expiry, and the holds on it
 * (id → [amount, expiresAt, pid of the process that placed it]).
 */
interface Durable {
  v: string;
  exp?: number;
  holds?: Record<string, HoldEntry>;
}

type HoldEntry = [amount: number, expiresAt: number, pid?: number];

/**
 * In-process implementation for the memory and fs drivers; each key is serialized through its
 * own promise chain (one process owns the data). Expiring counters (`increment`) are rate
 * windows and live in memory only.
 *
 * Values are kept as live objects in a Map (docs/performance.md): an operation reads and
 * replaces plain objects, with no JSON parse per step. None of them leaves this class (callers
 * get strings and numbers), so no copies are needed.
 * - memory (no `kv`): the Map is the store.
 * - fs (`kv`, the journal): the Map is a cache in front of the unstorage instance, filled on
 *   first read; every change is also written there (serialized once, for the journal), so it
 *   survives a restart. This class is the only writer of its keys in the owning process (the
 *   admin command's operations run here too, storage/remote.ts). The drivers apply a write to
 *   their memory within the `setItem` call and resolve once it is durable (fs: journaled). So
 *   an operation holds its keys only while it reads and computes — the next operation on the
 *   key sees its result at once — and answers once its writes are durable: a hot key (a
 *   workspace's credits) is not held across an fsync.
 */
export class LocalAtomic implements Atomic {
  readonly #kv: Storage | undefined;
  /** Live values: the store itself without `kv`, a read-through cache of it with one. */
  readonly #values = new Map<string, Durable>();
  /** Bumped on every change: a cache fill that raced one is not kept. */
  #generation = 0;
  readonly #counters = new Map<string, { value: number; expiresAt: number }>();
  readonly #locks = new Map<string, Promise<unknown>>();
  readonly #unsynced = new Map<string, Promise<unknown>>();

  /** `kv`: where values are persisted (fs); without it they live in this process only (memory). */
  constructor(kv?: Storage) {
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
    return this.#locked([key], async (writes) => {
      const item = await this.#raw(key);
      if (live(item)) return false;
      this.#write(writes, key, { ...keepHolds(item), v: value, ...expiry(ttlMs) });
      return true;
    });
  }

  async get(key: string) {
    const item = await this.#raw(key);
    await this.#readDurable([key]);
    return live(item) ? item!.v : null;
  }

  delete(key: string) {
    return this.#locked([key], async (writes) => {
      this.#remove(writes, key);
    });
  }

  compareAndSet(key: string, expected: string | null, next: string | null, ttlMs?: number) {
    return this.#locked([key], async (writes) => {
      const item = await this.#raw(key);
      if ((live(item) ? item!.v : null) !== expected) return false;
      if (next === null) this.#remove(writes, key);
      else this.#write(writes, key, { ...keepHolds(item), v: next, ...expiry(ttlMs) });
      return true;
    });
  }

  adjust(key: string, delta: number) {
    return this.#locked([key], async (writes) => {
      const item = await this.#raw(key);
      const balance = valueOf(item) + delta;
      this.#write(writes, key, { ...item, v: String(balance) });
      return balance;
    });
  }

  debit(key: string, amount: number, floor = 0) {
    return this.#locked([key], async (writes) => {
      const item = await this.#raw(key);
      const current = valueOf(item);
      if (current - amount < floor) return { ok: false, balance: current };
      this.#write(writes, key, { ...item, v: String(current - amount) });
      return { ok: true, balance: current - amount };
    });
  }

  async balance(key: string) {
    const item = await this.#raw(key);
    await this.#readDurable([key]);
    return valueOf(item);
  }

  hold(id: string, lines: HoldLine[], leaseMs: number) {
    return this.#locked(lines.map((line) => line.key), async (writes) => {
      const now = Date.now();
      const items = await Promise.all(lines.map((line) => this.#raw(line.key)));
      const accounts = items.map((item) => ledgerState(item, now));
      for (const [index, line] of lines.entries()) {
        const { value, held, exp } = accounts[index]!;
        if (!fits(line, value, held)) return { index, value, held, ttlMs: exp ? exp - now : 0 };
      }
      lines.forEach((line, index) => {
          const account = accounts[index]!;
          const record: Durable = { v: String(account.value + (line.commit ? line.amount : 0)), holds: account.holds };
          const exp = account.exp ?? (line.windowMs ? now + line.windowMs : undefined);
          if (exp) record.exp = exp;
          if (!line.commit) record.holds = { ...account.holds, [id]: [line.amount, now + leaseMs, process.pid] };
          this.#write(writes, line.key, tidy(record));
        });
      return null;
    });
  }

  settle(id: string, lines: SettleLine[]) {
    return this.#locked(lines.map((line) => line.key), async (writes) => {
      const now = Date.now();
      const items = await Promise.all(lines.map((line) => this.#raw(line.key)));
      lines.forEach((line, index) => {
          const account = ledgerState(items[index]!, now);
          const holds: Record<string, HoldEntry> = {};
          for (const other in account.holds) if (other !== id) holds[other] = account.holds[other]!;
          const record: Durable = { v: String(account.value + line.delta), holds };
          const exp = account.exp ?? (line.windowMs && line.delta ? now + line.windowMs : undefined);
          if (exp) record.exp = exp;
          this.#write(writes, line.key, tidy(record));
        });
    });
  }

  renew(id: string, keys: string[], leaseMs: number) {
    return this.#locked(keys, async (writes) => {
      const now = Date.now();
      for (const key of keys) {
        const item = await this.#raw(key);
        if (!item?.holds?.[id]) continue;
        item.holds[id] = [item.holds[id]![0], now + leaseMs, process.pid];
        this.#write(writes, key, item);
      }
    });
  }

  async account(key: string): Promise<AccountState> {
    const now = Date.now();
    const item = await this.#raw(key);
    await this.#readDurable([key]);
    const { value, held, exp } = ledgerState(item, now);
    return { value, held, ttlMs: exp ? exp - now : 0 };
  }

  #path(key: string) {
    return `atomic:${key}`;
  }

  #raw(key: string): Durable | null | Promise<Durable | null> {
    const cached = this.#values.get(key);
    if (cached !== undefined || !this.#kv) return cached ?? null;
    return this.#fill(key);
  }

  /** A cache miss (fs): read and parse once; kept unless a change to any key raced the read. */
  async #fill(key: string): Promise<Durable | null> {
    const generation = this.#generation;
    const item = ((await this.#kv!.getItem(this.#path(key))) as Durable | null) ?? null;
    if (item && generation === this.#generation) this.#values.set(key, item);
    return this.#values.get(key) ?? item;
  }

  /** Within #locked, into its `writes`: applied now, durable when the operation answers. */
  #write(writes: Promise<unknown>[], key: string, item: Durable) {
    this.#generation++;
    this.#values.set(key, item);
    if (this.#kv) writes.push(this.#pending(key, this.#kv.setItem(this.#path(key), item as never)));
  }

  #remove(writes: Promise<unknown>[], key: string) {
    this.#generation++;
    this.#values.delete(key);
    if (this.#kv) writes.push(this.#pending(key, this.#kv.removeItem(this.#path(key))));
  }

  /** Remembers the latest write of `key` until it is durable. */
  #pending(key: string, write: Promise<unknown>): Promise<unknown> {
    const settled = write.catch(() => undefined);
    this.#unsynced.set(key, settled);
    void settled.then(() => {
      if (this.#unsynced.get(key) === settled) this.#unsynced.delete(key);
    });
    return write;
  }

  /**
   * Waits until what was read from these keys is durable: an answer never rests on a write
   * that a crash could still undo (a claim refused because of a claim not yet on disk).
   */
  async #readDurable(keys: string[]): Promise<void> {
    if (!this.#unsynced.size) return;
    for (const key of keys) {
      const write = this.#unsynced.get(key);
      if (write) await write;
    }
  }

  /**
   * Runs `fn` holding every key (in a fixed order, so two multi-key calls never deadlock),
   * then waits for its writes to be durable with the keys already free.
   */
  async #locked<T>(keys: string[], fn: (writes: Promise<unknown>[]) => Promise<T>): Promise<T> {
    const sorted = keys.length === 1 ? keys : [...new Set(keys)].sort();
    const writes: Promise<unknown>[] = [];
    const result =
      sorted.length === 1
        ? await this.#lockOne(sorted[0]!, () => fn(writes))
        : await sorted.reduceRight<() => Promise<T>>((inner, key) => () => this.#lockOne(key, inner), () => fn(writes))();
    if (writes.length) await Promise.all(writes);
    if (this.#unsynced.size) await this.#readDurable(sorted);
    return result;
  }

  #lockOne<T>(key: string, fn: () => Promise<T>): Promise<T> {
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

function live(item: Durable | null): boolean {
  return !!item && item.v !== undefined && (item.exp === undefined || item.exp > Date.now());
}

function valueOf(item: Durable | null): number {
  return live(item) ? Number(item!.v) : 0;
}

function expiry(ttlMs?: number): { exp?: number } {
  return ttlMs ? { exp: Date.now() + ttlMs } : {};
}

function keepHolds(item: Durable | null): { holds?: Durable["holds"] } {
  return item?.holds ? { holds: item.holds } : {};
}

/**
 * Whether the process that placed a hold is gone (fs: the server was killed). Its holds are
 * released at once rather than at the end of their lease (docs/crash-consistency.md).
 */
const deadPids = new Map<number, boolean>();
function processGone(pid: number | undefined): boolean {
  if (pid === undefined || pid === process.pid) return false;
  let gone = deadPids.get(pid);
  if (gone === undefined) {
    try {
      process.kill(pid, 0);
      gone = false;
    } catch (error) {
      gone = (error as NodeJS.ErrnoException).code === "ESRCH";
    }
    // Only a death is remembered: a live process may die later.
    if (gone) deadPids.set(pid, true);
  }
  return gone;
}

/**
 * An account as of `now`: a window that ran out starts again at 0; expired holds, and holds
 * of a process that no longer runs, are gone.
 */
function ledgerState(item: Durable | null, now: number) {
  const windowLive = !!item && (item.exp === undefined || item.exp > now);
  const value = windowLive ? Number(item!.v ?? 0) : 0;
  const all = item?.holds;
  let holds: Record<string, HoldEntry> = all ?? {};
  let held = 0;
  let dropped = false;
  for (const id in all) {
    const [amount, expiresAt, pid] = all[id]!;
    if (expiresAt <= now || processGone(pid)) dropped = true;
    else held += amount;
  }
  // A copy only when some hold is gone; the record is replaced, never changed, when written.
  if (dropped) {
    holds = {};
    for (const id in all) {
      const entry = all[id]!;
      if (entry[1] > now && !processGone(entry[2])) holds[id] = entry;
    }
  }
  return { value, held, holds, exp: windowLive ? item?.exp : undefined };
}

export function fits(line: HoldLine, value: number, held: number): boolean {
  if (line.kind === "balance") return value - held - line.amount >= (line.limit ?? 0);
  return line.limit === undefined || value + held + line.amount <= line.limit;
}

function tidy(record: Durable): Durable {
  if (record.holds && Object.keys(record.holds).length === 0) delete record.holds;
  return record;
}
