import { normalizeKey } from "unstorage";
import { admit } from "./admission.js";
import type { Change } from "./record-map.js";

/** A change of one record (not of an index). */
type RecordChange = Extract<Change, { op: "set" | "remove" }>;

/**
 * One account of a hold (the ledger, docs/architecture.md "Money"). An account is an integer value at a
 * key plus the holds placed on it:
 * - `balance` accounts hold what is left (workspace credits), down to `limit` (default 0);
 * - `usage` accounts count what was used (a key's spend, tokens per minute, a plan's
 *   allowance, a tenant's month) up to `limit`; without a limit the hold is still recorded,
 *   so a later limit sees the requests in flight.
 * Admission (what is held, and when a line is refused) is storage/admission.ts.
 */
export interface HoldLine {
  key: string;
  kind: "balance" | "usage";
  /** What the request may cost at most on this account (integer ≥ 0); the hold may be capped (storage/admission.ts). */
  amount: number;
  /** What is known of the cost before the model runs (its prompt, ≤ amount): refused when it alone passes what remains (storage/admission.ts). */
  known?: number;
  limit?: number;
  /** A usage counted in a window of this length that starts when the account is first touched. */
  windowMs?: number;
  /**
   * Counted into the value at once rather than held (a requests-per-minute counter). An
   * account is either counted at once or held, never both: a line counted at once does not
   * read the account's holds (Redis: storage/redis-atomic.ts).
   */
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
  /** False when the hold placed nothing on this account (a usage only counted when the request ends): its holds are not read. */
  held?: boolean;
}

export interface AccountState {
  value: number;
  held: number;
  ttlMs: number;
  /** The capped hold in flight on this account, if any (storage/admission.ts). */
  capped?: string;
}

/** One holder's place in a set of places (`Atomic.claimPlace`): its weight and the token that owns it. */
export interface PlaceRenewal {
  holder: string;
  token: string;
  weight: number;
}

/** The answer of `Atomic.claimPlaces`: taken in every set, or refused by the set at `refusedAt`, whose other holders weigh `others`. */
export type PlacesClaim = { taken: true } | { taken: false; refusedAt: number; others: number };

/** The answer of `Atomic.claimPlace`: whether the place was taken, what the other holders weigh, what this holder weighed before. */
export interface PlaceClaim {
  taken: boolean;
  others: number;
  own: number;
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
  /** Adds each delta to its integer value, all in one step (one round trip on Redis). */
  addAll(deltas: [key: string, delta: number][]): Promise<void>;
  /** Subtracts `amount` only if the balance stays at or above `floor`. */
  debit(key: string, amount: number, floor?: number): Promise<{ ok: boolean; balance: number }>;
  /** Reads an integer balance (0 when absent). */
  balance(key: string): Promise<number>;
  /**
   * Places hold `id` on every line at once, or on none: null when admitted, else the first
   * line refused by the admission rule (storage/admission.ts: each line holds its amount
   * capped at what remains). Expired holds of those accounts are released first (the lease of a
   * process that died). One atomic step (one round trip on Redis).
   */
  hold(id: string, lines: HoldLine[], leaseMs: number): Promise<HoldRefusal | null>;
  /**
   * Ends hold `id` on every line at once: releases what is still held and adds each delta.
   * A hold that already expired is not released twice; the delta is still applied (usage
   * that happened is counted). `counters` are added in the same step (the request's metering,
   * as `addAll`). One atomic step (one round trip on Redis).
   */
  settle(id: string, lines: SettleLine[], counters?: [key: string, delta: number][]): Promise<void>;
  /** Pushes the lease of hold `id` on these accounts to `leaseMs` from now (long requests). */
  renew(id: string, keys: string[], leaseMs: number): Promise<void>;
  /** An account's value, what is held on it (live holds only) and its window's time left. */
  account(key: string): Promise<AccountState>;
  /**
   * Places with leases (docs/quotas.md): takes a place of `weight` in the set `key` for
   * `holder`, owned by `token`, whose lease ends `leaseMs` from now unless renewed. Taken when
   * the other holders' weights plus `weight` stay within `limit`, or when `weight` is no more
   * than what the holder already has (a holder keeps its place, so a VM that reconnects is
   * never refused for its own old socket); a taken place replaces the holder's token, weight
   * and lease. Expired places are dropped first (the leases of a process that died). One
   * atomic step (one round trip on Redis).
   */
  claimPlace(key: string, holder: string, token: string, weight: number, limit: number, leaseMs: number): Promise<PlaceClaim>;
  /**
   * claimPlace() in several sets at once, all or none: taken in every set when each stays within
   * its limit, else in none, with the first set (its index in `sets`) that refused and what its
   * other holders weigh. One atomic step, so concurrent claims at the edge never leave a place
   * taken in one set for a claim another set refused.
   */
  claimPlaces(
    sets: readonly { key: string; limit: number }[],
    holder: string,
    token: string,
    weight: number,
    leaseMs: number,
  ): Promise<PlacesClaim>;
  /** Gives up the holder's place, only while `token` still owns it (a newer claim of the holder is left alone). */
  releasePlace(key: string, holder: string, token: string): Promise<void>;
  /**
   * Pushes the leases of these places to `leaseMs` from now, while their token owns them; a
   * place that is gone (its lease ran out while its process stalled) is taken again, whatever
   * the limit: what it counts is still there.
   */
  renewPlaces(key: string, places: PlaceRenewal[], leaseMs: number): Promise<void>;
  /** The live places of a set: their summed weight and how many holders. */
  places(key: string): Promise<{ weight: number; holders: number }>;
}

/**
 * Where LocalAtomic persists its records (fs: the journal, storage/journal.ts): read from
 * memory synchronously; a write is applied at once and resolves once it is durable.
 */
export interface AtomicRecords {
  get(key: string): string | undefined;
  set(key: string, value: string): Promise<void>;
  remove(key: string): Promise<void>;
  /** Every change at once or none (fs: one journal line): the writes of one operation, so a settlement lands whole. */
  write?(changes: readonly Change[]): Promise<void>;
}

/** What LocalAtomic persists per key: the value and its expiry (a window's end). */
interface Durable {
  v: string;
  exp?: number;
}

/** One place of a set (`Atomic.claimPlace`). */
interface LivePlace {
  weight: number;
  token: string;
  expiresAt: number;
}

/**
 * The places of one set with their summed weight and earliest lease end kept beside them, so
 * claiming or releasing a place touches that place only; the others are looked at once the
 * earliest lease has passed (as the holds of an account are).
 */
class PlaceSet {
  readonly places = new Map<string, LivePlace>();
  weight = 0;
  #nextExpiry = Infinity;

  put(holder: string, place: LivePlace): void {
    this.remove(holder);
    this.places.set(holder, place);
    this.weight += place.weight;
    if (place.expiresAt < this.#nextExpiry) this.#nextExpiry = place.expiresAt;
  }

  remove(holder: string): void {
    const place = this.places.get(holder);
    if (!place) return;
    this.places.delete(holder);
    this.weight -= place.weight;
    if (!this.places.size) {
      this.weight = 0;
      this.#nextExpiry = Infinity;
    }
  }

  /** Drops the places whose lease ended as of `now`. */
  expire(now: number): void {
    if (this.#nextExpiry > now) return;
    let weight = 0;
    let nextExpiry = Infinity;
    for (const [holder, place] of this.places) {
      if (place.expiresAt <= now) {
        this.places.delete(holder);
        continue;
      }
      weight += place.weight;
      if (place.expiresAt < nextExpiry) nextExpiry = place.expiresAt;
    }
    this.weight = weight;
    this.#nextExpiry = nextExpiry;
  }
}

/** A hold on one account: [amount, expiresAt]. */
type HoldEntry = [amount: number, expiresAt: number];

/**
 * The live form of a record, changed in place. Holds are kept here only: they matter only to
 * the process that placed them (its requests in flight), so a restart, which ends those
 * requests, releases them all. In a Map with their sum and the earliest lease end kept
 * alongside, so admitting or settling a hold touches only that hold (expired holds are looked
 * for only once the earliest lease has passed).
 */
interface Live {
  v: string | undefined;
  exp?: number;
  holds?: Map<string, HoldEntry>;
  /** Sum of the holds' amounts. */
  held: number;
  /** The earliest `expiresAt` of the holds (Infinity without holds). */
  nextExpiry: number;
  /** The id of the capped hold in flight, if any (storage/admission.ts: at most one). */
  capped?: string;
}

/**
 * In-process implementation for the memory and fs drivers; one process owns the data.
 * Expiring counters (`increment`) are rate windows and live in memory only, and so do the
 * holds (see `Live`) and the counts a hold takes at once (`commit`: requests per minute), so
 * placing a hold writes nothing.
 *
 * Values are kept as live objects in a Map (docs/performance.md) and changed in place; none
 * of them leaves this class (callers get strings and numbers).
 * - memory (no `records`): the Map is the store.
 * - fs (`records`, the journal): the Map is a parsed cache of the journal's records, filled on
 *   first read; every change of a value is also written there (serialized once), so it
 *   survives a restart. This class is the only writer of its keys in the owning process (the
 *   admin command's operations run here too, storage/remote.ts).
 *
 * Both are read synchronously, so every operation reads, decides and changes its keys in one
 * synchronous step that nothing can interleave with — no locks — then answers once its writes
 * are durable (fs: journaled). A hot key (a workspace's credits) is never held across an
 * fsync: the next operation sees the change at once.
 */
export class LocalAtomic implements Atomic {
  readonly #records: AtomicRecords | undefined;
  /** Live values: the store itself without `records`, a read-through cache of them with. */
  readonly #values = new Map<string, Live>();
  readonly #counters = new Map<string, { value: number; expiresAt: number }>();
  /** Sets of places (`claimPlace`): in memory only, like holds, as they belong to this process's sockets and streams. */
  readonly #places = new Map<string, PlaceSet>();
  /** The latest write of a key until it is durable. */
  readonly #unsynced = new Map<string, Promise<unknown>>();
  /** The changes of the operation being computed (fs), written together once it is done. */
  #batch: { keys: string[]; changes: RecordChange[] } | undefined;

  /** `records`: where values are persisted (fs); without it they live in this process only (memory). */
  constructor(records?: AtomicRecords) {
    this.#records = records;
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
    return this.#atomically([key], (writes) => {
      const item = this.#raw(key);
      if (live(item)) return false;
      this.#write(writes, key, withValue(item, value, ttlMs ? Date.now() + ttlMs : undefined));
      return true;
    });
  }

  get(key: string) {
    return this.#atomically([key], () => {
      const item = this.#raw(key);
      return live(item) ? item!.v! : null;
    });
  }

  delete(key: string) {
    return this.#atomically([key], (writes) => {
      this.#remove(writes, key);
    });
  }

  compareAndSet(key: string, expected: string | null, next: string | null, ttlMs?: number) {
    return this.#atomically([key], (writes) => {
      const item = this.#raw(key);
      if ((live(item) ? item!.v! : null) !== expected) return false;
      if (next === null) this.#remove(writes, key);
      else this.#write(writes, key, withValue(item, next, ttlMs ? Date.now() + ttlMs : undefined));
      return true;
    });
  }

  adjust(key: string, delta: number) {
    return this.#atomically([key], (writes) => {
      const item = this.#raw(key);
      const balance = numberOf(item) + delta;
      if (item) item.v = String(balance);
      this.#write(writes, key, item ?? withValue(null, String(balance), undefined));
      return balance;
    });
  }

  addAll(deltas: [key: string, delta: number][]) {
    return this.#atomically(
      deltas.map(([key]) => key),
      (writes) => {
        for (const [key, delta] of deltas) {
          const item = this.#raw(key);
          const value = String(numberOf(item) + delta);
          if (item) item.v = value;
          this.#write(writes, key, item ?? withValue(null, value, undefined));
        }
      },
    );
  }

  debit(key: string, amount: number, floor = 0) {
    return this.#atomically([key], (writes) => {
      const item = this.#raw(key);
      const current = numberOf(item);
      if (current - amount < floor) return { ok: false, balance: current };
      if (item) item.v = String(current - amount);
      this.#write(writes, key, item ?? withValue(null, String(current - amount), undefined));
      return { ok: true, balance: current - amount };
    });
  }

  balance(key: string) {
    return this.#atomically([key], () => numberOf(this.#raw(key)));
  }

  hold(id: string, lines: HoldLine[], leaseMs: number) {
    return this.#atomically(
      lines.map((line) => line.key),
      (): HoldRefusal | null => {
        const now = Date.now();
        const items = lines.map((line) => this.#raw(line.key));
        const admitted = [];
        for (let index = 0; index < lines.length; index++) {
          const item = items[index] ?? null;
          if (item) release(item, now);
          const value = windowValue(item, now);
          const held = item?.held ?? 0;
          const admission = admit(lines[index]!, value, held, item?.capped !== undefined && item.capped !== id);
          if (!admission) {
            const exp = windowLive(item, now) ? item!.exp : undefined;
            return { index, value, held, ttlMs: exp ? exp - now : 0 };
          }
          admitted.push(admission);
        }
        for (let index = 0; index < lines.length; index++) {
          const line = lines[index]!;
          const { amount, capped } = admitted[index]!;
          const item = items[index] ?? withValue(null, "0", undefined);
          const value = windowValue(item, now);
          const exp = (windowLive(item, now) ? item.exp : undefined) ?? (line.windowMs ? now + line.windowMs : undefined);
          item.v = String(value + (line.commit ? amount : 0));
          if (exp) item.exp = exp;
          else delete item.exp;
          if (!line.commit) {
            addHold(item, id, [amount, now + leaseMs]);
            if (capped) item.capped = id;
          }
          // Nothing is written: holds, and counts taken at once (a requests-per-minute window,
          // like `increment`), live in memory only.
          this.#values.set(line.key, item);
        }
        return null;
      },
    );
  }

  settle(id: string, lines: SettleLine[], counters: [key: string, delta: number][] = []) {
    return this.#atomically([...lines.map((line) => line.key), ...counters.map(([key]) => key)], (writes) => {
      for (const [key, delta] of counters) {
        const item = this.#raw(key);
        const value = String(numberOf(item) + delta);
        if (item) item.v = value;
        this.#write(writes, key, item ?? withValue(null, value, undefined));
      }
      const now = Date.now();
      for (const line of lines) {
        const item = this.#raw(line.key) ?? withValue(null, "0", undefined);
        release(item, now);
        const value = windowValue(item, now);
        const exp = (windowLive(item, now) ? item.exp : undefined) ?? (line.windowMs && line.delta ? now + line.windowMs : undefined);
        removeHold(item, id);
        item.v = String(value + line.delta);
        if (exp) item.exp = exp;
        else delete item.exp;
        this.#write(writes, line.key, item);
      }
    });
  }

  renew(id: string, keys: string[], leaseMs: number) {
    return this.#atomically(keys, () => {
      const now = Date.now();
      for (const key of keys) {
        const entry = this.#raw(key)?.holds?.get(id);
        if (entry) entry[1] = now + leaseMs;
      }
    });
  }

  account(key: string): Promise<AccountState> {
    return this.#atomically([key], () => {
      const now = Date.now();
      const item = this.#raw(key);
      if (item) release(item, now);
      const exp = windowLive(item, now) ? item!.exp : undefined;
      const state: AccountState = { value: windowValue(item, now), held: item?.held ?? 0, ttlMs: exp ? exp - now : 0 };
      if (item?.capped !== undefined) state.capped = item.capped;
      return state;
    });
  }

  async claimPlace(key: string, holder: string, token: string, weight: number, limit: number, leaseMs: number): Promise<PlaceClaim> {
    const set = this.#livePlaces(key, Date.now());
    const own = set.places.get(holder)?.weight ?? 0;
    const others = set.weight - own;
    if (weight > own && others + weight > limit) return { taken: false, others, own };
    set.put(holder, { weight, token, expiresAt: Date.now() + leaseMs });
    this.#places.set(key, set);
    return { taken: true, others, own };
  }

  async claimPlaces(
    sets: readonly { key: string; limit: number }[],
    holder: string,
    token: string,
    weight: number,
    leaseMs: number,
  ): Promise<PlacesClaim> {
    const now = Date.now();
    const live = sets.map(({ key }) => this.#livePlaces(key, now));
    for (const [i, set] of live.entries()) {
      const own = set.places.get(holder)?.weight ?? 0;
      const others = set.weight - own;
      if (weight > own && others + weight > sets[i]!.limit) return { taken: false, refusedAt: i, others };
    }
    for (const [i, set] of live.entries()) {
      set.put(holder, { weight, token, expiresAt: now + leaseMs });
      this.#places.set(sets[i]!.key, set);
    }
    return { taken: true };
  }

  async releasePlace(key: string, holder: string, token: string): Promise<void> {
    const set = this.#places.get(key);
    if (set?.places.get(holder)?.token !== token) return;
    set.remove(holder);
    if (!set.places.size) this.#places.delete(key);
  }

  async renewPlaces(key: string, places: PlaceRenewal[], leaseMs: number): Promise<void> {
    const set = this.#livePlaces(key, Date.now());
    const expiresAt = Date.now() + leaseMs;
    for (const { holder, token, weight } of places) {
      const current = set.places.get(holder);
      if (!current || current.token === token) set.put(holder, { weight, token, expiresAt });
    }
    if (set.places.size) this.#places.set(key, set);
  }

  async places(key: string): Promise<{ weight: number; holders: number }> {
    const set = this.#livePlaces(key, Date.now());
    return { weight: set.weight, holders: set.places.size };
  }

  /** The set's places whose lease has not ended (the others are dropped). */
  #livePlaces(key: string, now: number): PlaceSet {
    const set = this.#places.get(key) ?? new PlaceSet();
    set.expire(now);
    if (!set.places.size) this.#places.delete(key);
    return set;
  }

  #raw(key: string): Live | null {
    const cached = this.#values.get(key);
    if (cached !== undefined || !this.#records) return cached ?? null;
    // A cache miss (fs): parsed once from the journal's memory.
    const stored = this.#records.get(recordKey(key));
    if (stored === undefined) return null;
    const item = fromDurable(JSON.parse(stored) as Durable);
    this.#values.set(key, item);
    return item;
  }

  /**
   * Within an operation, into its `writes`: applied now, durable when the operation answers.
   * The changes of one operation are written as one journal record (fs): a settlement's
   * credits, key spend, plan usage, tenant tokens and metering counters are on disk together
   * or not at all (docs/crash-consistency.md).
   */
  #write(writes: Promise<unknown>[], key: string, item: Live) {
    this.#values.set(key, item);
    if (this.#records) this.#change(writes, key, { op: "set", key: recordKey(key), value: JSON.stringify(toDurable(item)) });
  }

  #remove(writes: Promise<unknown>[], key: string) {
    this.#values.delete(key);
    if (this.#records) this.#change(writes, key, { op: "remove", key: recordKey(key) });
  }

  #change(writes: Promise<unknown>[], key: string, change: RecordChange) {
    const batch = this.#batch;
    if (batch && this.#records!.write) {
      batch.keys.push(key);
      batch.changes.push(change);
      return;
    }
    this.#pending(writes, key, change.op === "set" ? this.#records!.set(change.key, change.value) : this.#records!.remove(change.key));
  }

  /** Writes the operation's batched changes: one record for several, as before for one. */
  #flush(writes: Promise<unknown>[], batch: { keys: string[]; changes: RecordChange[] }) {
    if (!batch.changes.length) return;
    const [only] = batch.changes;
    const write =
      batch.changes.length === 1
        ? only!.op === "set"
          ? this.#records!.set(only!.key, only!.value)
          : this.#records!.remove(only!.key)
        : this.#records!.write!(batch.changes);
    for (const key of batch.keys) this.#pending(writes, key, write);
  }

  /**
   * Remembers the latest write of `key` until it is durable. The writes of one operation
   * usually share one promise (the journal batch they joined): it is awaited once.
   */
  #pending(writes: Promise<unknown>[], key: string, write: Promise<unknown>) {
    this.#unsynced.set(key, write);
    if (!writes.includes(write)) writes.push(write);
  }

  /**
   * Runs `compute` as one atomic step (synchronous: nothing interleaves), then answers once
   * its writes are durable, and once what it read is: an answer never rests on a write that
   * a crash could still undo (a claim refused because of a claim not yet on disk).
   */
  async #atomically<T>(keys: string[], compute: (writes: Promise<unknown>[]) => T): Promise<T> {
    const writes: Promise<unknown>[] = [];
    const batch = { keys: [] as string[], changes: [] as RecordChange[] };
    const outer = this.#batch;
    this.#batch = batch;
    let result: T;
    try {
      result = compute(writes);
    } finally {
      // Whatever the step changed in memory is written, as before, even when it then threw.
      this.#batch = outer;
      this.#flush(writes, batch);
    }
    if (writes.length) {
      try {
        await (writes.length === 1 ? writes[0] : Promise.all(writes));
      } finally {
        // Durable (or failed, and answered so): a later write of the same key stays tracked.
        for (const key of keys) {
          const write = this.#unsynced.get(key);
          if (write && writes.includes(write)) this.#unsynced.delete(key);
        }
      }
    }
    if (this.#unsynced.size) {
      for (const key of keys) {
        const write = this.#unsynced.get(key);
        if (write) await write.catch(() => undefined);
      }
    }
    return result;
  }

  #sweep(now: number) {
    if (this.#counters.size < 10_000) return;
    for (const [key, entry] of this.#counters) if (entry.expiresAt <= now) this.#counters.delete(key);
  }
}

/**
 * The journal key of a record: `atomic:<key>`, as unstorage normalizes keys (the records were
 * written through it before, so existing data directories keep their keys).
 */
function recordKey(key: string): string {
  const path = `atomic:${key}`;
  return /[/\\?]|::|:$/.test(path) ? normalizeKey(path) : path;
}

/** A new record with `v` and `exp`, keeping the holds of the one it replaces. */
function withValue(item: Live | null, v: string, exp: number | undefined): Live {
  const next: Live = { v, held: item?.held ?? 0, nextExpiry: item?.nextExpiry ?? Infinity };
  if (item?.holds) next.holds = item.holds;
  if (item?.capped !== undefined) next.capped = item.capped;
  if (exp !== undefined) next.exp = exp;
  return next;
}

function live(item: Live | null): boolean {
  return !!item && item.v !== undefined && (item.exp === undefined || item.exp > Date.now());
}

function numberOf(item: Live | null): number {
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
  if (item.capped === id) delete item.capped;
  if (!item.holds!.size) {
    delete item.holds;
    item.held = 0;
    item.nextExpiry = Infinity;
  }
}

/** Drops the holds whose lease ended as of `now`; looks only once the earliest lease has passed. */
function release(item: Live, now: number): void {
  if (!item.holds || item.nextExpiry > now) return;
  let held = 0;
  let nextExpiry = Infinity;
  for (const [id, entry] of item.holds) {
    if (entry[1] <= now) {
      item.holds.delete(id);
      if (item.capped === id) delete item.capped;
      continue;
    }
    held += entry[0];
    if (entry[1] < nextExpiry) nextExpiry = entry[1];
  }
  item.held = held;
  item.nextExpiry = nextExpiry;
  if (!item.holds.size) delete item.holds;
}

/**
 * A stored record. Holds found in one (written by versions that persisted them) belong to a
 * process that no longer runs, as one process owns the data: they are released.
 */
function fromDurable(stored: Durable): Live {
  const item: Live = { v: stored.v, held: 0, nextExpiry: Infinity };
  if (stored.exp !== undefined) item.exp = stored.exp;
  return item;
}

function toDurable(item: Live): Durable {
  return item.exp !== undefined ? { v: item.v!, exp: item.exp } : { v: item.v! };
}
