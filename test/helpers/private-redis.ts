import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:net";
import { Redis } from "ioredis";

export interface PrivateRedis {
  url: string;
  port: number;
  pid: number;
  /** A client of its own (commands it sends count in the server's stats: read them with `commandCounts`). */
  admin: Redis;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/**
 * A redis-server of this test's own on a free loopback port, for tests that change server
 * settings or fill the keyspace (CONFIG SET, DEBUG POPULATE, maxmemory, FLUSHALL): other suites
 * share 127.0.0.1:6379 at the same time. No persistence; DEBUG allowed from loopback. Stop it
 * in afterAll. `port`: the port of one stopped before (a Redis that comes back).
 */
export async function startPrivateRedis(args: string[] = [], options: { port?: number } = {}): Promise<PrivateRedis> {
  const port = options.port ?? (await freePort());
  // Its files (an AOF, when a test turns it on) in a directory of its own, removed with it.
  const dir = mkdtempSync(join(tmpdir(), "gw-redis-"));
  const child: ChildProcess = spawn(
    "redis-server",
    [
      "--bind",
      "127.0.0.1",
      "--port",
      String(port),
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      "no",
      "--enable-debug-command",
      "local",
      ...args,
    ],
    { stdio: "ignore" },
  );
  // A test or benchmark that dies before stopping it does not leave it running.
  const orphaned = () => child.kill("SIGKILL");
  process.once("exit", orphaned);
  const url = `redis://127.0.0.1:${port}`;
  // A server started with --requirepass: its admin client gives the password (`url` has none).
  const password = args.includes("--requirepass") ? args[args.indexOf("--requirepass") + 1] : undefined;
  const admin = new Redis(url, { password, maxRetriesPerRequest: 1, lazyConnect: true, retryStrategy: () => 50 });
  admin.on("error", () => undefined);
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      if (admin.status === "wait") await admin.connect();
      await admin.ping();
      break;
    } catch (error) {
      if (Date.now() > deadline || child.exitCode !== null) {
        process.off("exit", orphaned);
        child.kill("SIGKILL");
        admin.disconnect();
        throw new Error(`redis-server on port ${port} did not start: ${(error as Error).message}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    url,
    port,
    pid: child.pid!,
    admin,
    async stop() {
      process.off("exit", orphaned);
      admin.disconnect();
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, "exit");
        child.kill("SIGTERM");
        // Redis finishing an AOF rewrite may take its time: it has no data worth waiting for.
        const killer = setTimeout(() => child.kill("SIGKILL"), 3000);
        await exited;
        clearTimeout(killer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `INFO commandstats` as command → calls. */
export async function commandCounts(redis: Redis): Promise<Map<string, number>> {
  const info = await redis.info("commandstats");
  const counts = new Map<string, number>();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts.set(match[1]!, Number(match[2]));
  return counts;
}

/** What `run` sent the server, by command (stats reset first; the stats commands themselves left out). */
export async function commandsOf(redis: Redis, run: () => Promise<unknown>): Promise<Record<string, number>> {
  await redis.config("RESETSTAT");
  await run();
  const counts = await commandCounts(redis);
  const out: Record<string, number> = {};
  for (const [command, calls] of [...counts].sort(([a], [b]) => a.localeCompare(b))) {
    if (command === "info" || command === "config|resetstat") continue;
    out[command] = calls;
  }
  return out;
}
