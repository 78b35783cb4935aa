import type { Storage } from "unstorage";

const SEGMENT = /^[\w.-]+$/;

/**
 * A typed set of JSON records under one key prefix. Ids are path segments, so records can
 * be nested (`keys:<owner>:<id>`) and listed by a prefix without a separate index.
 */
export class Collection<T> {
  readonly #kv: Storage;
  readonly #name: string;

  constructor(kv: Storage, name: string) {
    this.#kv = kv;
    this.#name = name;
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
    await this.#kv.setItem(this.key(...parts), value as never);
    return value;
  }

  async remove(...parts: string[]): Promise<void> {
    await this.#kv.removeItem(this.key(...parts));
  }

  /** The keys of every record below the prefix, in key order. */
  async keys(...prefix: string[]): Promise<string[]> {
    const base = this.key(...prefix);
    return (await this.#kv.getKeys(base)).filter((key) => key.startsWith(`${base}:`)).sort();
  }

  /** The records at these full keys (from `keys`), those still there. */
  async getMany(keys: string[]): Promise<T[]> {
    if (keys.length === 0) return [];
    const items = await this.#kv.getItems(keys);
    return items.map((item) => item.value as T).filter((value) => value !== null && value !== undefined);
  }

  /** Every record below the prefix, in key order. */
  async list(...prefix: string[]): Promise<T[]> {
    const base = this.key(...prefix);
    const keys = (await this.#kv.getKeys(base)).filter((key) => key.startsWith(`${base}:`)).sort();
    if (keys.length === 0) return [];
    const items = await this.#kv.getItems(keys);
    return items.map((item) => item.value as T).filter((value) => value !== null && value !== undefined);
  }
}
