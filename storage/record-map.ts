import { SortedIndex } from "./sorted-index.js";

/**
 * One change of an atomic write (storage/indexes.ts `Indexes.write`): a record set or removed,
 * a member added to an index (with its score: 0 in an index listed in lexical order, a time in
 * a queue polled by score) or dropped from one.
 */
export type Change =
  | { op: "set"; key: string; value: string }
  | { op: "remove"; key: string }
  | { op: "index"; index: string; member: string; score: number }
  | { op: "unindex"; index: string; member: string };

/** A range of an index listed in lexical order (storage/sorted-index.ts `members`). */
export interface LexRange {
  /** Members after this one (exclusive): a page's cursor. */
  after?: string;
  /** Members from this one (inclusive). */
  from?: string;
  /** Members below this one (exclusive). */
  below?: string;
  limit?: number;
}

/**
 * Records and indexes held in memory, as the memory store keeps them and as the fs journal
 * (storage/journal.ts) loads them: every change of a write is applied in one synchronous step,
 * so no reader ever sees a record without its index entries or the reverse.
 */
export class RecordMap {
  readonly data = new Map<string, string>();
  readonly indexes = new Map<string, SortedIndex>();

  apply(changes: readonly Change[]): void {
    for (const change of changes) {
      switch (change.op) {
        case "set":
          this.data.set(change.key, change.value);
          break;
        case "remove":
          this.data.delete(change.key);
          break;
        case "index": {
          let index = this.indexes.get(change.index);
          if (!index) this.indexes.set(change.index, (index = new SortedIndex()));
          index.add(change.member, change.score);
          break;
        }
        case "unindex": {
          const index = this.indexes.get(change.index);
          if (index?.remove(change.member) && index.size === 0) this.indexes.delete(change.index);
          break;
        }
      }
    }
  }

  members(index: string, range: LexRange = {}): string[] {
    return this.indexes.get(index)?.members(range) ?? [];
  }

  upTo(index: string, max: number, limit: number): { member: string; score: number }[] {
    return this.indexes.get(index)?.upTo(max, limit) ?? [];
  }

  count(index: string): number {
    return this.indexes.get(index)?.size ?? 0;
  }

  keys(prefix: string): string[] {
    const keys: string[] = [];
    for (const key of this.data.keys()) if (!prefix || key.startsWith(prefix)) keys.push(key);
    return keys;
  }
}

/**
 * What the local stores (memory, fs) keep their records in: read synchronously from memory;
 * a change is applied at once and its promise resolves once it is durable (fs: journaled;
 * memory: at once). Implemented by MemoryRecords below and by the fs Journal.
 */
export interface RecordEngine {
  get(key: string): string | undefined;
  has(key: string): boolean;
  keys(prefix: string): string[];
  set(key: string, value: string): Promise<void>;
  remove(key: string): Promise<void>;
  clear(prefix: string): Promise<void>;
  /** Every change at once, or none (one journal line on fs). */
  write(changes: readonly Change[]): Promise<void>;
  members(index: string, range?: LexRange): string[];
  upTo(index: string, max: number, limit: number): { member: string; score: number }[];
  count(index: string): number;
  close(): Promise<void>;
}

/** The memory store's records: a RecordMap, nothing written anywhere. */
export class MemoryRecords implements RecordEngine {
  readonly #map = new RecordMap();

  get(key: string) {
    return this.#map.data.get(key);
  }

  has(key: string) {
    return this.#map.data.has(key);
  }

  keys(prefix: string) {
    return this.#map.keys(prefix);
  }

  async set(key: string, value: string) {
    this.#map.data.set(key, value);
  }

  async remove(key: string) {
    this.#map.data.delete(key);
  }

  async clear(prefix: string) {
    for (const key of this.#map.keys(prefix)) this.#map.data.delete(key);
  }

  async write(changes: readonly Change[]) {
    this.#map.apply(changes);
  }

  members(index: string, range?: LexRange) {
    return this.#map.members(index, range);
  }

  upTo(index: string, max: number, limit: number) {
    return this.#map.upTo(index, max, limit);
  }

  count(index: string) {
    return this.#map.count(index);
  }

  async close() {}
}
