import type { Storage } from "unstorage";
import type { Change, Indexes, LexRange } from "./indexes.js";
import { LISTED } from "./layout.js";

const SEGMENT = /^[\w.-]+$/;

/**
 * The index entries of the record `<name>:<parts…>`: one per depth its collection is listed at
 * (storage/layout.ts) that the record is below.
 */
export function indexEntries(name: string, parts: string[]): { index: string; member: string }[] {
  const entries: { index: string; member: string }[] = [];
  for (const depth of LISTED[name] ?? []) {
    if (parts.length > depth) entries.push({ index: [name, ...parts.slice(0, depth)].join(":"), member: parts.slice(depth).join(":") });
  }
  return entries;
}

/** True when every part is a valid key segment (what the collections write). */
export function validParts(parts: string[]): boolean {
  return parts.length > 0 && parts.every((part) => SEGMENT.test(part));
}

/** What a collection reads and writes: the records (unstorage) and the indexes beside them. */
export interface RecordStore {
  readonly kv: Storage;
  readonly indexes: Indexes;
}

/**
 * A typed set of JSON records under one key prefix. Ids are path segments, so records can be
 * nested (`keys:<owner>:<id>`). A collection named in storage/layout.ts `LISTED` keeps an
 * index per listed depth, written in the same atomic step as each record; a listing reads
 * that index, never the keyspace (docs/storage.md "Indexes"). Other collections are read by
 * id only.
 */
export class Collection<T> {
  readonly #kv: Storage;
  readonly #indexes: Indexes;
  readonly #name: string;
  readonly #depths: readonly number[];

  constructor(store: RecordStore, name: string) {
    this.#kv = store.kv;
    this.#indexes = store.indexes;
    this.#name = name;
    this.#depths = LISTED[name] ?? [];
  }

  key(...parts: string[]): string {
    for (const part of parts) if (!SEGMENT.test(part)) throw new Error(`Invalid key segment in ${this.#name}`);
    return [this.#name, ...parts].join(":");
  }

  /** True when every part would make a valid key, for ids taken from callers. */
  static validId(id: string): boolean {
    return SEGMENT.test(id) && id.length <= 128;
  }

  async get(...parts: string[]): Promise<T | null> {
    return ((await this.#kv.getItem(this.key(...parts))) as T | null) ?? null;
  }

  async put(parts: string[], value: T): Promise<T> {
    if (this.#depths.length === 0) await this.#kv.setItem(this.key(...parts), value as never);
    else await this.#indexes.write(this.putChanges(parts, value));
    return value;
  }

  /**
   * Writes a record already stored and listed where it stays (its index entries are left as
   * they are): an update costs one write, as for a collection that is not listed.
   */
  async replace(parts: string[], value: T): Promise<T> {
    await this.#kv.setItem(this.key(...parts), value as never);
    return value;
  }

  async remove(...parts: string[]): Promise<void> {
    if (this.#depths.length === 0) await this.#kv.removeItem(this.key(...parts));
    else await this.#indexes.write(this.removeChanges(parts));
  }

  /**
   * The changes that write a record and its index entries, to join a larger atomic write.
   * `listed: false` keeps the record but takes it out of every listing (a revoked key).
   */
  putChanges(parts: string[], value: T, options: { listed?: boolean } = {}): Change[] {
    const changes: Change[] = [{ op: "set", key: this.key(...parts), value: JSON.stringify(value) }];
    for (const { index, member } of indexEntries(this.#name, parts)) {
      changes.push(options.listed === false ? { op: "unindex", index, member } : { op: "index", index, member, score: 0 });
    }
    return changes;
  }

  /** The changes that remove a record and its index entries. */
  removeChanges(parts: string[]): Change[] {
    const changes: Change[] = [{ op: "remove", key: this.key(...parts) }];
    for (const { index, member } of indexEntries(this.#name, parts)) changes.push({ op: "unindex", index, member });
    return changes;
  }

  /** The index of the records below `prefix` (a listed depth, else a programming error). */
  #listed(prefix: string[]): string {
    if (!this.#depths.includes(prefix.length)) {
      throw new Error(`${this.#name} is not listed by ${prefix.length} key part(s): name the depth in storage/layout.ts LISTED`);
    }
    return this.key(...prefix);
  }

  /** The ids (key parts after `prefix`, joined by `:`) below the prefix, in key order, within `range`. */
  ids(prefix: string[], range?: LexRange): Promise<string[]> {
    return this.#indexes.members(this.#listed(prefix), range);
  }

  /** The keys of every record below the prefix, in key order. */
  async keys(...prefix: string[]): Promise<string[]> {
    const base = this.key(...prefix);
    return (await this.ids(prefix)).map((id) => `${base}:${id}`);
  }

  /** How many records are below the prefix (the index's size, no record read). */
  count(...prefix: string[]): Promise<number> {
    return this.#indexes.count(this.#listed(prefix));
  }

  /** The records at these full keys (from `keys`), those still there. */
  async getMany(keys: string[]): Promise<T[]> {
    if (keys.length === 0) return [];
    const items = await this.#kv.getItems(keys);
    return items.map((item) => item.value as T).filter((value) => value !== null && value !== undefined);
  }

  /** Every record below the prefix, in key order (within `range` of the ids). */
  async list(...prefix: string[]): Promise<T[]> {
    return this.getMany(await this.keys(...prefix));
  }

  /** The records below `prefix` whose ids fall within `range`, in key order. */
  async range(prefix: string[], range: LexRange): Promise<T[]> {
    const base = this.key(...prefix);
    return this.getMany((await this.ids(prefix, range)).map((id) => `${base}:${id}`));
  }
}
