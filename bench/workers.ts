/**
 * Every core of one host (docs/operating.md "Every core"): Platform JSON chat completions per
 * second through `npm start` with WORKERS=1, 2 and 4 (node:cluster workers on one port, state
 * in a redis-server of this run's own), beside a bare Node relay (bench/internal/floor-proxy.ts,
 * one process) in the same run. Loopback only; the load generator (autocannon) runs in this
 * process, the mock upstream in another.
 *
 *   npm run bench:workers
 *
 * The service runs compiled, as `npm start` runs it (dist/scripts/start.js). A first gateway
 * (bench/internal/chat-server.ts) seeds a user with credits and a Platform key with rpm and tpm
 * limits on the same Redis, then stops; each WORKERS setting then serves that key.
 *
 * Environment: BENCH_SECONDS (default 5), BENCH_WARMUP_SECONDS (default 2), BENCH_CONCURRENCY
 * (default 64), BENCH_WORKERS (default "1,2,4"), MOCK_LATENCY_MS (default 2).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { cpus } from "node:os";
import autocannon from "autocannon";
import { forkReady } from "./internal/fork-ready.js";
import { startPrivateRedis } from "../test/helpers/private-redis.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const WORKERS = (process.env.BENCH_WORKERS ?? "1,2,4").split(",").map(Number);
const LATENCY_MS = Number(process.env.MOCK_LATENCY_MS ?? 2);
const MODEL = "bench-model";
const SECRETS = {
  GATEWAY_JWT_SECRET: "bench-secret-that-is-at-least-32-characters",
  DATA_ENCRYPTION_SECRET: "bench-data-secret-at-least-32-characters",
};

const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Say hello in five words." }], max_tokens: 32 });

async function load(url: string, token: string, seconds: number): Promise<{ rps: number; p50: number; p99: number }> {
  const result = await autocannon({
    url,
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body,
    connections: CONCURRENCY,
    duration: seconds,
    timeout: 10,
  });
  if (result.non2xx || result.errors || result.timeouts) {
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  await exited;
  clearTimeout(timer);
}

/** `npm start` as a deployment runs it, with WORKERS=n; resolves with its origin once it listens. */
async function startGateway(env: Record<string, string>): Promise<{ child: ChildProcess; origin: string }> {
  const child = spawn(process.execPath, ["dist/scripts/start.js"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  const origin = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (chunk) => {
      stderr += chunk;
      const match = /platform\s+(http:\/\/127\.0\.0\.1:\d+)\/api\/v1/.exec(stderr);
      if (match) resolve(match[1]!);
    });
    child.once("exit", (code) => reject(new Error(`the gateway exited with ${code}: ${stderr}`)));
  });
  return { child, origin };
}

async function main() {
  const started = Date.now();
  const redis = await startPrivateRedis();
  const mock = await forkReady("bench/internal/mock-upstream.ts", { MOCK_LATENCY_MS: String(LATENCY_MS) });
  const mockOrigin = mock.words[0]!;
  const env = {
    STORAGE: "redis",
    REDIS_URL: redis.url,
    REDIS_PREFIX: "gw",
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "silent",
    WEBHOOKS_POLL_MS: "0",
    MODELS_JSON: JSON.stringify({ models: { [MODEL]: { provider: "openai-compatible", baseURL: `${mockOrigin}/v1`, ownedBy: "bench" } } }),
    ...SECRETS,
  };
  const rows: { label: string; rps: number; p50: number; p99: number }[] = [];
  try {
    const floor = await forkReady("bench/internal/floor-proxy.ts", { UPSTREAM: mockOrigin, KEY: "floor-key" });
    try {
      const url = `${floor.words[0]}/v1/chat/completions`;
      await load(url, "floor-key", WARMUP_SECONDS);
      rows.push({ label: "floor (bare Node relay, 1 process)", ...(await load(url, "floor-key", SECONDS)) });
    } finally {
      await stop(floor.child);
    }
    // The key, seeded once on the shared Redis (bench/internal/chat-server.ts), served by every run below.
    const seed = await forkReady("bench/internal/chat-server.ts", env);
    const platformKey = seed.words[1]!;
    await stop(seed.child);
    for (const workers of WORKERS) {
      const gateway = await startGateway({ ...env, WORKERS: String(workers) });
      try {
        const url = `${gateway.origin}/api/v1/chat/completions`;
        await load(url, platformKey, WARMUP_SECONDS);
        const run = await load(url, platformKey, SECONDS);
        rows.push({ label: `gateway, WORKERS=${workers}`, ...run });
        process.stderr.write(`WORKERS=${workers}: ${Math.round(run.rps)} req/s, p50 ${run.p50} ms, p99 ${run.p99} ms\n`);
      } finally {
        await stop(gateway.child);
      }
    }
  } finally {
    await stop(mock.child);
    await redis.stop();
  }
  const lines = [
    `Workers — ${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), Node ${process.versions.node}`,
    `Platform JSON chat, mock upstream latency ${LATENCY_MS} ms, c=${CONCURRENCY}, ${SECONDS} s per run; total ${((Date.now() - started) / 1000).toFixed(0)} s.`,
    "",
    "| run | req/s | p50 ms | p99 ms |",
    "|---|---|---|---|",
    ...rows.map((row) => `| ${row.label} | ${Math.round(row.rps)} | ${row.p50} | ${row.p99} |`),
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
