import cluster, { type Worker } from "node:cluster";
import { availableParallelism } from "node:os";
import { AggregatorRegistry } from "prom-client";
import type { Config } from "../rpc/config.js";

/**
 * `WORKERS` (docs/operating.md "Every core"): N node:cluster workers serving one port, each a
 * whole service (its own event loop, connections to Redis, caches fed by the bus), sharing
 * every piece of state through Redis as separate instances do. This file is the primary's
 * side: it serves no request; it starts the workers, says once that they listen, hands
 * SIGTERM/SIGINT on so each drains as one process would, starts a worker again when one dies
 * unasked, and answers the workers' requests for every worker's metrics (GET /metrics shows
 * the sum of all of them, whichever worker took the scrape).
 */

/** What a worker tells the primary over the cluster's IPC channel. */
export type WorkerMessage = { gw: "ready"; urls: Record<string, string> } | { gw: "failed"; line: string } | { gw: "metrics"; id: number };

/** The workers WORKERS asks for: `auto` is one per core this process may use. */
export function workerCount(config: Pick<Config, "WORKERS">): number {
  return config.WORKERS === "auto" ? availableParallelism() : config.WORKERS;
}

/**
 * Why these settings cannot run several workers, or undefined. Workers share state as
 * instances do, through Redis: the memory store is each process's own, and the fs store is
 * one process's (DATA_DIR has one owner; its bus and caches do not cross processes).
 */
export function workersRefusal(config: Pick<Config, "STORAGE">, count: number): string | undefined {
  if (count <= 1 || config.STORAGE === "redis") return undefined;
  const why =
    config.STORAGE === "memory"
      ? "STORAGE=memory keeps every record in each process"
      : "STORAGE=fs is served by the one process that owns DATA_DIR, and its bus and caches do not cross processes";
  return `Invalid configuration: WORKERS=${count}: workers share their state through Redis, and ${why}; set STORAGE=redis, or WORKERS=1`;
}

/** Unasked deaths tolerated in a minute before the primary gives up (a worker that cannot stay up). */
const RESTARTS_PER_MINUTE = 5;

/** Runs the primary; resolves never (the process exits from here). */
export async function runPrimary(config: Config, count: number): Promise<void> {
  const aggregator = new AggregatorRegistry();
  const urls = new Promise<Record<string, string>>((resolve, reject) => {
    let ready = 0;
    let first: Record<string, string> | undefined;
    cluster.on("message", (worker: Worker, message: WorkerMessage) => {
      if (message?.gw === "ready") {
        first ??= message.urls;
        if (++ready === count) resolve(first);
      } else if (message?.gw === "failed") reject(new Error(message.line));
      else if (message?.gw === "metrics") {
        aggregator.clusterMetrics().then(
          (body) => worker.send({ gw: "metrics", id: message.id, body, contentType: aggregator.contentType }),
          (error: Error) => worker.send({ gw: "metrics", id: message.id, error: error.message }),
        );
      }
    });
    cluster.on("exit", (_worker, code, signal) => {
      if (ready < count) reject(new Error(`Start failed: a worker exited (${signal ?? `code ${code}`}) before it listened`));
    });
  });
  for (let i = 0; i < count; i++) cluster.fork();
  let listening: Record<string, string>;
  try {
    listening = await urls;
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGKILL");
    process.exit(1);
  }
  process.stderr.write(`Gateway listening (storage: ${config.STORAGE}, ${count} workers)\n`);
  for (const [name, url] of Object.entries(listening)) process.stderr.write(`  ${name.padEnd(12)} ${url}\n`);

  let stopping: { signal: string; at: number } | undefined;
  const deaths: number[] = [];
  cluster.removeAllListeners("exit");
  cluster.on("exit", (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
      return;
    }
    // Died unasked (killed, out of memory, a crash): another takes its place, the others serve meanwhile.
    const now = Date.now();
    deaths.push(now);
    while (deaths.length && deaths[0]! < now - 60_000) deaths.shift();
    if (deaths.length > RESTARTS_PER_MINUTE) {
      process.stderr.write(`worker ${worker.process.pid} exited (${signal ?? `code ${code}`}); ${deaths.length} in a minute: stopping\n`);
      for (const other of Object.values(cluster.workers ?? {})) other?.process.kill("SIGTERM");
      process.exitCode = 1;
      stopping = { signal: "restarts", at: now };
      return;
    }
    process.stderr.write(`worker ${worker.process.pid} exited (${signal ?? `code ${code}`}); starting another\n`);
    cluster.fork();
  });
  const stop = (signal: string) => {
    if (stopping) {
      // The same keystroke reaching the primary twice (terminal and npm) is one request.
      if (stopping.signal === signal && Date.now() - stopping.at < 1000) return;
      process.stderr.write(`${signal} again: exiting now\n`);
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGKILL");
      process.exit(1);
    }
    stopping = { signal, at: Date.now() };
    process.stderr.write(`${signal}: draining ${count} workers (up to ${config.SHUTDOWN_GRACE_SECONDS} s each), then shutting down\n`);
    // Each worker drains as one process does (/readyz 503, in-flight requests finish, then it exits).
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGTERM");
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  await new Promise(() => undefined);
}
