import { Redis } from "ioredis";

/** Fails fast, with a clear message, when the Redis the storage and multi-instance tests need is down. */
export default async function setup() {
  const redis = new Redis(process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: 1, lazyConnect: true, retryStrategy: () => null });
  redis.on("error", () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new Error(`The test suite needs Redis at ${process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379"} (start it with .ci/run or redis-server): ${(error as Error).message}`);
  } finally {
    redis.disconnect();
  }
}
