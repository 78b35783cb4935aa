import cluster from "node:cluster";
import { type RunningServer, startServer } from "../facade/server.js";
import { type Config, loadConfig } from "../rpc/config.js";
import { startupFailure } from "./startup-errors.js";
import { runPrimary, type WorkerMessage, workerCount, workersRefusal } from "./workers.js";

// One process: `npm start` runs this file compiled (dist/scripts/start.js) with plain node, so
// the signals sent to `npm start` reach it (npm forwards SIGTERM and SIGINT to its child).
// With WORKERS above 1 this process is the node:cluster primary (scripts/workers.ts) and each
// worker runs this file again as a server.
const worker = cluster.isWorker;
let server: RunningServer;
let config: Config | undefined;
try {
  config = loadConfig(process.env);
  const count = workerCount(config);
  const refusal = worker ? undefined : workersRefusal(config, count);
  if (refusal) throw Object.assign(new Error(refusal), { code: "WORKERS" });
  if (!worker && count > 1) {
    await runPrimary(config, count);
    process.exit(0);
  }
  server = await startServer(config);
} catch (error) {
  // Every bad start is one line naming the variable and the fix, and exit code 1; a worker
  // hands its line to the primary, which prints it once.
  const line = startupFailure(error, config ?? process.env);
  if (worker) process.send!({ gw: "failed", line } satisfies WorkerMessage);
  else process.stderr.write(`${line}\n`);
  process.exit(1);
}
const { STORAGE, DATA_DIR } = config as Config;
if (worker) process.send!({ gw: "ready", urls: server.urls } satisfies WorkerMessage);
else {
  process.stderr.write(`Gateway listening (storage: ${STORAGE}${STORAGE === "fs" ? ` in ${DATA_DIR}` : ""})\n`);
  for (const [name, url] of Object.entries(server.urls)) process.stderr.write(`  ${name.padEnd(12)} ${url}\n`);
  for (const notice of server.composition.ports.store.notices) process.stderr.write(`warning: ${notice}\n`);
}

let stopping: { signal: string; at: number } | undefined;
const stop = async (signal: string) => {
  if (stopping) {
    // Ctrl-C in a terminal reaches this process twice (from the terminal, and forwarded by
    // npm): the same signal within a second is that one keystroke, not a second request.
    if (stopping.signal === signal && Date.now() - stopping.at < 1000) return;
    // A second signal: the operator wants out now.
    process.stderr.write(`${signal} again: exiting now\n`);
    process.exit(1);
  }
  stopping = { signal, at: Date.now() };
  // The primary says it once for every worker.
  if (!worker) process.stderr.write(`${signal}: draining (up to ${config.SHUTDOWN_GRACE_SECONDS} s), then shutting down\n`);
  try {
    await server.drain(config.SHUTDOWN_GRACE_SECONDS * 1000);
  } catch (error) {
    process.stderr.write(`shutdown: ${(error as Error).message}\n`);
    process.exit(1);
  }
  process.exit(0);
};
process.on("SIGINT", () => void stop("SIGINT"));
process.on("SIGTERM", () => void stop("SIGTERM"));
