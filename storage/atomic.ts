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
 * What LocalAtomic persists per key (the fs journal's record format): the value, its expiry,
 * and the holds on it (id → [amount, expiresAt, pid of the process that placed it]).
 */
interface Durable {
  v: string;
  exp?: number;
  holds?: Record<string, HoldEntry>;
}

type HoldEntry = [amount: number, expiresAt: number, pid?: number];

/**
 * The live form of a record, changed in place: the holds in a Map with their sum and the
 * earliest lease end kept alongside, so admitting or settling a hold touches only that hold
 * (expired holds are looked for only once the earliest lease has passed).
 */
interface Live {
  v: string | undefined;
  exp?: number;
  holds?: Map<string, HoldEntry>;
  /** Sum of the holds' amounts. */
  held: number;
  /** The earliest `expiresAt` of the holds (Infinity without holds). */
  nextExpiry: number;
  /** Holds placed by another process (a previous run on fs): looked at on every use, as it may die. */
  foreign: number;
}

/**
 * In-process implementation for the memory and fs drivers; one process owns the data.
 * Expiring counters (`increment`) are rate windows and live in memory only.
 *
 * Values are kept as live objects in a Map (docs/performance.md) and changed in place; none of
 * them leaves this class (callers get strings and numbers).
 * - memory (no `kv`): the Map is the store.
 * - fs (`kv`, the journal): the Map is a cache in front of the unstorage instance, filled on
 *   first read; every change is also written there (serialized once, for the journal), so it
 *   survives a restart. This class is the only writer of its keys in the owning process (the
 *   admin command's operations run here too, storage/remote.ts). The drivers apply a write to
 *   their memory within the `setItem` call and resolve once it is durable (fs: journaled). So
 *   an operation holds its keys only while it reads and computes — the next operation on the
 *   key sees its result at once — and answers once its writes are durable: a hot key (a
 *   workspace's credits) is not held across an fsync.
 *
 * An operation whose keys are all in memory and not held by another operation runs in one
 * synchronous step, which nothing can interleave with; otherwise it waits its turn on each
 * key (a promise chain per key) and reads what is missing.
 */
export class LocalAtomic implements Atomic {
  readonly #kv: Storage | undefined;
  /** Live values: the store itself without `kv`, a read-through cache of it with one. */
  readonly #values = new Map<string, Live>();
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
    return this.#atomically([key], ([item], writes) => {
      if (live(item)) return false;
      this.#write(writes, key, withValue(item, value, ttlMs ? Date.now() + ttlMs : undefined));
      return true;
    });
  }

  async get(key: string) {
    const item = await this.#raw(key);
    await this.#readDurable([key]);
    return live(item) ? item!.v! : null;
  }

  delete(key: string) {
    return this.#atomically([key], (_items, writes) => {
      this.#remove(writes, key);
    });
  }

  compareAndSet(key: string, expected: string | null, next: string | null, ttlMs?: number) {
    return this.#atomically([key], ([item], writes) => {
      if ((live(item) ? item!.v! : null) !== expected) return false;
      if (next === null) this.#remove(writes, key);
      else this.#write(writes, key, withValue(item, next, ttlMs ? Date.now() + ttlMs : undefined));
      return true;
    });
  }

  adjust(key: string, delta: number) {
    return this.#atomically([key], ([item], writes) => {
      const balance = valueOf(item) + delta;
      this.#write(writes, key, withValue(item, String(balance), item?.exp));
      return balance;
    });
  }

  debit(key: string, amount: number, floor = 0) {
    return this.#atomically([key], ([item], writes) => {
      const current = valueOf(item);
      if (current - amount < floor) return { ok: false, balance: current };
      this.#write(writes, key, withValue(item, String(current - amount), item?.exp));
      return { ok: true, balance: current - amount };
    });
  }

  async balance(key: string) {
    const item = await this.#raw(key);
    await this.#readDurable([key]);
    return valueOf(item);
  }

  hold(id: string, lines: HoldLine[], leaseMs: number) {
    return this.#atomically(
      lines.map((line) => line.key),
      (items, writes): HoldRefusal | null => {
        const now = Date.now();
        for (let index = 0; index < lines.length; index++) {
          const item = items[index] ?? null;
          if (item) release(item, now);
          const value = windowValue(item, now);
          const held = item?.held ?? 0;
          if (!fits(lines[index]!, value, held)) {
            const exp = windowLive(item, now) ? item!.exp : undefined;
            return { index, value, held, ttlMs: exp ? exp - now : 0 };
          }
        }
        for (let index = 0; index < lines.length; index++) {
          const line = lines[index]!;
          const item = items[index] ?? emptyLive();
          const value = windowValue(item, now);
          const exp = (windowLive(item, now) ? item.exp : undefined) ?? (line.windowMs ? now + line.windowMs : undefined);
          item.v = String(value + (line.commit ? line.amount : 0));
          if (exp) item.exp = exp;
          else delete item.exp;
          if (!line.commit) addHold(item, id, [line.amount, now + leaseMs, process.pid]);
          this.#write(writes, line.key, item);
        }
        return null;
      },
    );
  }

  settle(id: string, lines: SettleLine[]) {
    return this.#atomically(
      lines.map((line) => line.key),
      (items, writes) => {
        const now = Date.now();
        for (let index = 0; index < lines.length; index++) {
          const line = lines[index]!;
          const item = items[index] ?? emptyLive();
          release(item, now);
          const value = windowValue(item, now);
          const exp = (windowLive(item, now) ? item.exp : undefined) ?? (line.windowMs && line.delta ? now + line.windowMs : undefined);
          removeHold(item, id);
          item.v = String(value + line.delta);
          if (exp) item.exp = exp;
          else delete item.exp;
          this.#write(writes, line.key, item);
        }
      },
    );
  }

  renew(id: string, keys: string[], leaseMs: number) {
    return this.#atomically(keys, (items, writes) => {
      const now = Date.now();
      keys.forEach((key, index) => {
        const item = items[index];
        const entry = item?.holds?.get(id);
        if (!item || !entry) return;
        const wasForeign = entry[2] !== undefined && entry[2] !== process.pid;
        item.holds!.set(id, [entry[0], now + leaseMs, process.pid]);
        if (wasForeign) item.foreign--;
        this.#write(writes, key, item);
      });
    });
  }

  async account(key: string): Promise<AccountState> {
    const now = Date.now();
    const item = await this.#raw(key);
    await this.#readDurable([key]);
    if (item) release(item, now);
    const exp = windowLive(item, now) ? item!.exp : undefined;
    return { value: windowValue(item, now), held: item?.held ?? 0, ttlMs: exp ? exp - now : 0 };
  }

  #path(key: string) {
    return `atomic:${key}`;
  }

  #raw(key: string): Live | null | Promise<Live | null> {
    const cached = this.#values.get(key);
    if (cached !== undefined || !this.#kv) return cached ?? null;
    return this.#fill(key);
  }

  /** A cache miss (fs): read and parse once; kept unless a change to any key raced the read. */
  async #fill(key: string): Promise<Live | null> {
    const generation = this.#generation;
    const stored = ((await this.#kv!.getItem(this.#path(key))) as Durable | null) ?? null;
    const cached = this.#values.get(key);
    if (cached) return cached;
    const item = stored ? fromDurable(stored) : null;
    if (item && generation === this.#generation) this.#values.set(key, item);
    return item;
  }

  /** Within an operation, into its `writes`: applied now, durable when the operation answers. */
  #write(writes: Promise<unknown>[], key: string, item: Live) {
    this.#generation++;
    this.#values.set(key, item);
    if (this.#kv) writes.push(this.#pending(key, this.#kv.setItem(this.#path(key), toDurable(item) as never)));
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
   * Runs `compute` on the live records of `keys` as one atomic step, then waits for its writes
   * to be durable with the keys already free. When every key is in memory and no other
   * operation holds one, `compute` runs at once (synchronously: nothing interleaves);
   * otherwise the operation takes every key in a fixed order (two multi-key operations never
   * deadlock) and reads what is missing first.
   */
  async #atomically<T>(keys: string[], compute: (items: (Live | null)[], writes: Promise<unknown>[]) => T): Promise<T> {
    const writes: Promise<unknown>[] = [];
    let result: T;
    if (this.#ready(keys)) {
      result = compute(
        keys.map((key) => this.#values.get(key) ?? null),
        writes,
      );
    } else {
      const run = async () => compute(await Promise.all(keys.map((key) => this.#raw(key))), writes);
      const sorted = keys.length === 1 ? keys : [...new Set(keys)].sort();
      result = sorted.length === 1 ? await this.#lockOne(sorted[0]!, run) : await sorted.reduceRight<() => Promise<T>>((inner, key) => () => this.#lockOne(key, inner), run)();
    }
    if (writes.length) await Promise.all(writes);
    if (this.#unsynced.size) await this.#readDurable(keys);
    return result;
  }

  /** Every key free and its record in memory (memory: always in memory, absent or not). */
  #ready(keys: string[]): boolean {
    for (const key of keys) {
      if (this.#locks.has(key)) return false;
      if (this.#kv && !this.#values.has(key)) return false;
    }
    return true;
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

function emptyLive(): Live {
  return { v: undefined, held: 0, nextExpiry: Infinity, foreign: 0 };
}

/** A new record with `v` and `exp`, keeping the holds of the one it replaces. */
function withValue(item: Live | null, v: string, exp: number | undefined): Live {
  const next: Live = item ? { v, holds: item.holds, held: item.held, nextExpiry: item.nextExpiry, foreign: item.foreign } : { ...emptyLive(), v };
  if (!next.holds) delete next.holds;
  if (exp !== undefined) next.exp = exp;
  return next;
}

function live(item: Live | null): boolean {
  return !!item && item.v !== undefined && (item.exp === undefined || item.exp > Date.now());
}

function valueOf(item: Live | null): number {
  return live(item) ? Number(item!.v) : 0;
}

/** Whether the record's window (if it has one) is still running. */
function windowLive(item: Live | null, now: number): boolean {
  return !!item && (item.exp === undefined || item.exp > now);
}

/** The value as of `now`: a window that ran out starts again at 0. */
function windowValue(item: Live | null, now: number): number {
  return windowLive(item, now) ? Number(item!.v ?? 0) : 0;
}

function isForeign(entry: HoldEntry): boolean {
  return entry[2] !== undefined && entry[2] !== process.pid;
}

function addHold(item: Live, id: string, entry: HoldEntry): void {
  removeHold(item, id);
  (item.holds ??= new Map()).set(id, entry);
  item.held += entry[0];
  if (entry[1] < item.nextExpiry) item.nextExpiry = entry[1];
}

function removeHold(item: Live, id: string): void {
  const entry = item.holds?.get(id);
  if (!entry) return;
  item.holds!.delete(id);
  item.held -= entry[0];
  if (isForeign(entry)) item.foreign--;
  if (!item.holds!.size) {
    delete item.holds;
    item.held = 0;
    item.nextExpiry = Infinity;
  }
}

/**
 * Drops the holds that ended as of `now`: expired ones, and those of a process that no longer
 * runs (fs: the server was killed; released at once rather than at the end of their lease,
 * docs/crash-consistency.md). Looks only when the earliest lease has passed or a hold of
 * another process is there.
 */
function release(item: Live, now: number): void {
  if (!item.holds || (item.nextExpiry > now && item.foreign === 0)) return;
  let held = 0;
  let nextExpiry = Infinity;
  let foreign = 0;
  for (const [id, entry] of item.holds) {
    if (entry[1] <= now || processGone(entry[2])) {
      item.holds.delete(id);
      continue;
    }
    held += entry[0];
    if (entry[1] < nextExpiry) nextExpiry = entry[1];
    if (isForeign(entry)) foreign++;
  }
  item.held = held;
  item.nextExpiry = nextExpiry;
  item.foreign = foreign;
  if (!item.holds.size) delete item.holds;
}

function fromDurable(stored: Durable): Live {
  const item: Live = { v: stored.v, held: 0, nextExpiry: Infinity, foreign: 0 };
  if (stored.exp !== undefined) item.exp = stored.exp;
  for (const id in stored.holds) {
    const entry = stored.holds[id]!;
    (item.holds ??= new Map()).set(id, entry);
    item.held += entry[0];
    if (entry[1] < item.nextExpiry) item.nextExpiry = entry[1];
    if (isForeign(entry)) item.foreign++;
  }
  return item;
}

function toDurable(item: Live): Durable {
  const stored: Durable = { v: item.v! };
  if (item.exp !== undefined) stored.exp = item.exp;
  if (item.holds?.size) stored.holds = Object.fromEntries(item.holds);
  return stored;
}

/**
 * Whether the process that placed a hold is gone (fs: the server was killed).
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

export function fits(line: HoldLine, value: number, held: number): boolean {
  if (line.kind === "balance") return value - held - line.amount >= (line.limit ?? 0);
  return line.limit === undefined || value + held + line.amount <= line.limit;
}
