import type { Redis } from "ioredis";
import { defineDriver } from "unstorage";
import redisDriver from "unstorage/drivers/redis";

/**
 * unstorage's Redis driver, plus raw values stored as Redis strings of bytes: the stock driver
 * has no `setItemRaw`, so unstorage would store a `base64:` string a third larger
 * (artifacts, docs/tenants.md "Artifacts"). Keys are the driver's own (`<base>:<key>`), so
 * `removeItem` and `getKeys` see raw values like any other.
 */
export const rawRedisDriver = defineDriver((options: { url: string; base: string; client: Redis; maxRetriesPerRequest?: number }) => {
  const inner = redisDriver({ url: options.url, base: options.base, maxRetriesPerRequest: options.maxRetriesPerRequest });
  const base = options.base.replace(/:$/, "");
  const keyOf = (key: string) => `${base}:${key}`;
  return {
    ...inner,
    name: "redis-raw",
    async getItemRaw(key: string) {
      return options.client.getBuffer(keyOf(key));
    },
    async setItemRaw(key: string, value: Uint8Array) {
      await options.client.set(keyOf(key), Buffer.from(value.buffer, value.byteOffset, value.byteLength));
    },
  };
});
