import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** A Redis prefix of its own for one test file, so parallel files never share keys. */
export function uniqueRedisPrefix(): string {
  return `test-${randomUUID().slice(0, 8)}`;
}

/** Deletes every key under a test prefix. */
export async function dropRedisPrefix(prefix: string, url = TEST_REDIS_URL): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on("error", () => undefined);
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 500);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}
