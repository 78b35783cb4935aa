import type { Redis } from "ioredis";
import type { Change, LexRange, RecordEngine } from "./record-map.js";

export type { Change, LexRange } from "./record-map.js";

/**
 * Records written together with their index entries, and the indexes read back
 * (docs/storage.md "Indexes"). Every collection that is listed keeps its own index — a sorted
 * set per owner, tenant or queue — changed in the same atomic step as the record, so a
 * listing reads the index and the records it names and never walks the keyspace: its cost
 * follows what it lists, whatever else the store holds.
 *
 * - memory and fs: a RecordEngine (storage/record-map.ts) applies every change of a write in
 *   one synchronous step; fs journals them as one checksummed line.
 * - Redis: records are strings at `<prefix>:kv:<key>` (the layout unstorage gave them), each
 *   index a sorted set at `<prefix>:ix:{<index>}`; a write of several changes is one
 *   MULTI/EXEC (one round trip).
 */
export interface Indexes {
  /** Every change at once, or none; resolves once durable. */
  write(changes: readonly Change[]): Promise<void>;
  /** Members of an index listed in lexical order (all scores 0). */
  members(index: string, range?: LexRange): Promise<string[]>;
  /** Members of a queue whose score is at most `max`, lowest first. */
  upTo(index: string, max: number, limit: number): Promise<{ member: string; score: number }[]>;
  count(index: string): Promise<number>;
}

/** The memory and fs stores' indexes, over their record engine. */
export class LocalIndexes implements Indexes {
  readonly #engine: RecordEngine;

  constructor(engine: RecordEngine) {
    this.#engine = engine;
  }

  write(changes: readonly Change[]) {
    return this.#engine.write(changes);
  }

  async members(index: string, range?: LexRange | null) {
    // `null` when the call came over the admin socket (storage/remote.ts) without a range.
    return this.#engine.members(index, range ?? {});
  }

  async upTo(index: string, max: number, limit: number) {
    return this.#engine.upTo(index, max, limit);
  }

  async count(index: string) {
    return this.#engine.count(index);
  }
}

/**
 * Redis: the index `<index>` is the sorted set `<prefix>:ix:{<index>}`. The braces are a
 * Redis Cluster hash tag (docs/storage.md "Keys and hash tags"): an index and what is written
 * with it in one step are meant to share one slot there.
 */
export class RedisIndexes implements Indexes {
  readonly #redis: Redis;
  readonly #kv: string;
  readonly #ix: string;

  constructor(redis: Redis, prefix: string) {
    this.#redis = redis;
    this.#kv = `${prefix}:kv:`;
    this.#ix = `${prefix}:ix:`;
  }

  /** The Redis key of index `index`. */
  indexKey(index: string): string {
    return `${this.#ix}{${index}}`;
  }

  recordKey(key: string): string {
    return this.#kv + key;
  }

  async write(changes: readonly Change[]) {
    if (changes.length === 0) return;
    if (changes.length === 1) {
      const [command, ...args] = this.#command(changes[0]!);
      await this.#redis.call(command, ...args);
      return;
    }
    // MULTI/EXEC: applied together or not at all (a refused command, such as one past
    // maxmemory, aborts the whole transaction), sent in one write.
    const multi = this.#redis.multi();
    for (const change of changes) {
      const [command, ...args] = this.#command(change);
      multi.call(command, ...args);
    }
    const results = await multi.exec();
    for (const [error] of results ?? []) if (error) throw error;
  }

  #command(change: Change): [string, ...(string | number)[]] {
    switch (change.op) {
      case "set":
        return ["SET", this.recordKey(change.key), change.value];
      case "remove":
        return ["UNLINK", this.recordKey(change.key)];
      case "index":
        return ["ZADD", this.indexKey(change.index), change.score, change.member];
      case "unindex":
        return ["ZREM", this.indexKey(change.index), change.member];
    }
  }

  async members(index: string, range: LexRange = {}) {
    const min = range.after !== undefined ? `(${range.after}` : range.from !== undefined ? `[${range.from}` : "-";
    const max = range.below !== undefined ? `(${range.below}` : "+";
    const key = this.indexKey(index);
    return range.limit !== undefined
      ? this.#redis.zrangebylex(key, min, max, "LIMIT", 0, range.limit)
      : this.#redis.zrangebylex(key, min, max);
  }

  async upTo(index: string, max: number, limit: number) {
    const flat = await this.#redis.zrangebyscore(this.indexKey(index), "-inf", max, "WITHSCORES", "LIMIT", 0, limit);
    const out: { member: string; score: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ member: flat[i]!, score: Number(flat[i + 1]) });
    return out;
  }

  count(index: string) {
    return this.#redis.zcard(this.indexKey(index));
  }
}
