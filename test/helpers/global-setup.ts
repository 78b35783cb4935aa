import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { Redis } from "ioredis";
import { buildConsole } from "../../scripts/build-console.mjs";

async function answers(url: string): Promise<boolean> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true, retryStrategy: () => null });
  redis.on("error", () => undefined);
  try {
    await redis.connect();
    await redis.ping();
    return true;
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/** The keys under the service's default REDIS_PREFIX ("gw"), which no test may write. */
async function defaultPrefixKeys(url: string): Promise<Set<string>> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on("error", () => undefined);
  const keys = new Set<string>();
  try {
    let cursor = "0";
    do {
      const [next, found] = await redis.scan(cursor, "MATCH", "gw:*", "COUNT", 1000);
      cursor = next;
      for (const key of found) keys.add(key);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
  return keys;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/**
 * The storage and multi-instance tests need a real Redis. When nothing answers at
 * TEST_REDIS_URL (default redis://127.0.0.1:6379) and `redis-server` is installed, a private
 * one is started on a free port for this run (no persistence) and stopped afterwards; the
 * test workers inherit TEST_REDIS_URL pointing at it. Neither: one line saying what to install.
 * Also bundles the console page (scripts/build-console.mjs) when its sources changed.
 */
export default async function setup() {
  // The console page's bundle, which /console serves and the browser tests load (test/facade/console).
  await buildConsole();
  const wanted = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
  if (await answers(wanted)) {
    // Every test that uses Redis has a prefix of its own (uniqueRedisPrefix); one that forgot it
    // writes under the service's default prefix, which this run must leave as it found it.
    const before = await defaultPrefixKeys(wanted);
    return async () => {
      const after = await defaultPrefixKeys(wanted);
      const written = [...after].filter((key) => !before.has(key));
      if (written.length > 0) {
        // vitest reports a teardown's throw but keeps the run's exit code: set it here too.
        process.exitCode = 1;
        throw new Error(`A test wrote ${written.length} keys outside its own prefix, e.g. ${written.slice(0, 3).join(", ")}`);
      }
    };
  }
  if (spawnSync("redis-server", ["--version"], { stdio: "ignore" }).error) {
    throw new Error(
      `Nothing answers at ${wanted} and redis-server is not on the PATH: install Redis (e.g. apt-get install redis-server), or set TEST_REDIS_URL to a running one`,
    );
  }
  const port = await freePort();
  const child: ChildProcess = spawn("redis-server", ["--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no"], {
    stdio: "ignore",
  });
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100 && !(await answers(url)); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  if (!(await answers(url))) {
    child.kill("SIGKILL");
    throw new Error(`Started redis-server on port ${port} for the tests, but it does not answer`);
  }
  process.env.TEST_REDIS_URL = url;
  return async () => {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await exited;
  };
}
