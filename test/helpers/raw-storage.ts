import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { Redis } from "ioredis";
import { TEST_REDIS_URL } from "./redis.js";

/** Every file under `dir` (fs storage, secrets beside it included), concatenated: for "this secret is not at rest" checks. */
export async function rawFiles(dir: string): Promise<string> {
  const parts: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) parts.push(await readFile(join(entry.parentPath, entry.name), "utf8"));
  }
  return parts.join("\n");
}

/** Every string, hash and list value under a Redis prefix, concatenated with its key. */
export async function rawRedis(prefix: string, url = TEST_REDIS_URL): Promise<string> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on("error", () => undefined);
  const parts: string[] = [];
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 500);
      cursor = next;
      for (const key of keys) {
        const type = await redis.type(key);
        if (type === "string") parts.push(`${key} ${await redis.get(key)}`);
        else if (type === "hash") parts.push(`${key} ${JSON.stringify(await redis.hgetall(key))}`);
        else if (type === "list") parts.push(`${key} ${(await redis.lrange(key, 0, -1)).join(" ")}`);
        else if (type === "zset") parts.push(`${key} ${(await redis.zrange(key, 0, -1)).join(" ")}`);
        else if (type === "set") parts.push(`${key} ${(await redis.smembers(key)).join(" ")}`);
        else parts.push(key);
      }
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
  return parts.join("\n");
}
