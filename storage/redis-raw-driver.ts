import type { Redis } from "ioredis";
import { defineDriver } from "unstorage";

/**
 * The records on Redis as an unstorage driver, on the store's one connection (unstorage's own
 * Redis driver opens a second one and lists keys with SCAN): values are strings at
 * `<base>:<key>`, the layout unstorage's driver wrote, so existing data reads as before. Raw
 * values are stored as Redis strings of bytes (the stock driver has no `setItemRaw`, so
 * unstorage would store a `base64:` string a third larger: artifacts, docs/tenants.md
 * "Artifacts").
 *
 * `getKeys` and `clear` walk the keyspace with SCAN: nothing on a request path or in a
 * background loop calls them (listings read indexes, storage/indexes.ts); they serve the
 * one-time index build at start (storage/reindex.ts) and tools.
 */
export const rawRedisDriver = defineDriver((options: { base: string; client: Redis }) => {
  const base = options.base.replace(/:$/, "");
  const redis = options.client;
  const keyOf = (key: string) => `${base}:${key}`;
  const scan = async (prefix: string): Promise<string[]> => {
    const pattern = `${(prefix ? keyOf(prefix) : base).replace(/[*?[\]\\]/g, "\\$&")}:*`;
    const keys: string[] = [];
    let cursor = "0";
    do {
      const [next, found] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      keys.push(...found);
    } while (cursor !== "0");
    return keys;
  };
  return {
    name: "redis-raw",
    async hasItem(key: string) {
      return (await redis.exists(keyOf(key))) === 1;
    },
    getItem(key: string) {
      return redis.get(keyOf(key));
    },
    async getItems(items: { key: string }[]) {
      if (items.length === 0) return [];
      const values = await redis.mget(...items.map((item) => keyOf(item.key)));
      return items.map((item, index) => ({ key: item.key, value: values[index] ?? null }));
    },
    async setItem(key: string, value: string) {
      await redis.set(keyOf(key), value);
    },
    async removeItem(key: string) {
      await redis.unlink(keyOf(key));
    },
    async getKeys(prefix: string) {
      return (await scan(prefix)).map((key) => key.slice(base.length + 1));
    },
    async clear(prefix: string) {
      const keys = await scan(prefix);
      for (let i = 0; i < keys.length; i += 500) await redis.unlink(...keys.slice(i, i + 500));
    },
    async getItemRaw(key: string) {
      return redis.getBuffer(keyOf(key));
    },
    async setItemRaw(key: string, value: Uint8Array) {
      await redis.set(keyOf(key), Buffer.from(value.buffer, value.byteOffset, value.byteLength));
    },
  };
});
