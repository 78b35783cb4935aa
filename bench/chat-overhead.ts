/**
 * Chat overhead benchmark: what the gateway adds to a chat completion. POST
 * /api/v1/chat/completions with a Platform key (auth, rpm and tpm limits, credit check and
 * metering all on) in front of a local OpenAI-compatible mock with a fixed latency, against
 * the same mock called directly. Concurrency 1, 16 and 64 × JSON and SSE × STORAGE=memory
 * and STORAGE=redis. The gateway and the mock each run in a child process; autocannon drives
 * the load from this one. Loopback only.
 *
 *   npm run bench:chat
 *
 * Environment: BENCH_SECONDS (per measured run, default 5), BENCH_WARMUP_SECONDS (default 1),
 * BENCH_STORAGES (default "memory,redis"; also "fs", in a temporary DATA_DIR), BENCH_MODES (default "json,sse"), BENCH_CONCURRENCY (default "1,16,64"),
 * MOCK_LATENCY_MS (default 2), REDIS_URL (default redis://127.0.0.1:6379).
 */
import type { ChildProcess } from "node:child_process";
import { forkReady } from "./internal/fork-ready.js";
import { once } from "node:events";
import { randomUUID } from "node:crypto";
import { cpus, tmpdir } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import autocannon from "autocannon";
import { dropRedisPrefix } from "../test/helpers/redis.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
const STORAGES = (process.env.BENCH_STORAGES ?? "memory,redis").split(",").map((s) => s.trim()).filter(Boolean);
const MODES = (process.env.BENCH_MODES ?? "json,sse").split(",").map((s) => s.trim()).filter(Boolean);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,16,64").split(",").map(Number);
const LATENCY_MS = Number(process.env.MOCK_LATENCY_MS ?? 2);
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const MODEL = "bench-model";

const TARGETS = { addedP50AtC1Ms: 0.5, addedP99AtC16Ms: 3, throughputRatioAtC64: 0.7 };

function spawn(script: string, env: Record<string, string>): Promise<{ child: ChildProcess; words: string[] }> {
  return forkReady(script, env, process.env.BENCH_SERVER_EXEC_ARGV ? process.env.BENCH_SERVER_EXEC_ARGV.split(" ") : []);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

function body(stream: boolean): string {
  return JSON.stringify({
    model: MODEL,
    messages: [
      { role: "system", content: "You are a helpful assistant." },
      { role: "user", content: "Say hello in five words." },
    ],
    max_tokens: 32,
    ...(stream ? { stream: true } : {}),
  });
}

interface Run {
  p50: number;
  p99: number;
  rps: number;
  requests: number;
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** One autocannon run; latencies kept at full (sub-millisecond) resolution from its response events. */
async function load(url: string, headers: Record<string, string>, payload: string, connections: number, seconds: number): Promise<Run> {
  const latencies: number[] = [];
  let failures = 0;
  let firstFailure = "";
  const instance = autocannon({
    url,
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: payload,
    connections,
    pipelining: 1,
    duration: seconds,
    timeout: 10,
  });
  instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
    else if (failures++ === 0) firstFailure = `status ${statusCode}`;
  });
  const result = await instance;
  if (failures || result.errors || result.timeouts) {
    throw new Error(`${url} at c=${connections}: ${failures} non-2xx (${firstFailure}), ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  latencies.sort((a, b) => a - b);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), rps: latencies.length / result.duration, requests: latencies.length };
}

/** One request each way before measuring, so a broken setup fails loudly instead of benchmarking errors. */
async function check(url: string, headers: Record<string, string>, stream: boolean): Promise<void> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: body(stream) });
  const text = await res.text();
  const ok = res.status === 200 && text.includes(stream ? "mock" : "Hello from the mock model.") && (!stream || text.trimEnd().endsWith("data: [DONE]"));
  if (!ok) throw new Error(`${url} (stream ${stream}) answered ${res.status}: ${text.slice(0, 500)}`);
}


interface Row {
  storage: string;
  stream: boolean;
  concurrency: number;
  direct: Run;
  gateway: Run;
}

const ms = (value: number) => value.toFixed(2);

async function main() {
  const started = Date.now();
  const mock = await spawn("bench/internal/mock-upstream.ts", { MOCK_LATENCY_MS: String(LATENCY_MS) });
  const mockOrigin = mock.words[0]!;
  const directUrl = `${mockOrigin}/v1/chat/completions`;
  const rows: Row[] = [];
  try {
    for (const storage of STORAGES) {
      const prefix = `bench-chat-${randomUUID().slice(0, 8)}`;
      const dataDir = storage === "fs" ? mkdtempSync(join(tmpdir(), "bench-chat-")) : "";
      const gateway = await spawn("bench/internal/chat-server.ts", {
        STORAGE: storage,
        ...(dataDir ? { DATA_DIR: dataDir } : {}),
        REDIS_URL,
        REDIS_PREFIX: prefix,
        GATEWAY_JWT_SECRET: "bench-secret-that-is-at-least-32-characters",
        MODELS_JSON: JSON.stringify({ models: { [MODEL]: { provider: "openai-compatible", baseURL: `${mockOrigin}/v1`, ownedBy: "bench" } } }),
      });
      const [origin, key] = gateway.words as [string, string];
      const gatewayUrl = `${origin}/api/v1/chat/completions`;
      const auth = { authorization: `Bearer ${key}` };
      try {
        for (const stream of MODES.map((mode) => mode === "sse")) {
          await check(directUrl, {}, stream);
          await check(gatewayUrl, auth, stream);
          for (const concurrency of CONCURRENCY) {
            const payload = body(stream);
            if (WARMUP_SECONDS > 0) {
              await load(gatewayUrl, auth, payload, concurrency, WARMUP_SECONDS);
              await load(directUrl, {}, payload, concurrency, WARMUP_SECONDS);
            }
            const direct = await load(directUrl, {}, payload, concurrency, SECONDS);
            const viaGateway = await load(gatewayUrl, auth, payload, concurrency, SECONDS);
            const row = { storage, stream, concurrency, direct, gateway: viaGateway };
            rows.push(row);
            process.stderr.write(
              `${storage.padEnd(6)} ${(stream ? "sse" : "json").padEnd(4)} c=${String(concurrency).padEnd(3)} ` +
                `direct p50 ${ms(direct.p50)} p99 ${ms(direct.p99)} ${Math.round(direct.rps)}/s | ` +
                `gateway p50 ${ms(viaGateway.p50)} p99 ${ms(viaGateway.p99)} ${Math.round(viaGateway.rps)}/s\n`,
            );
          }
        }
      } finally {
        await stop(gateway.child);
        if (storage === "redis") await dropRedisPrefix(prefix, REDIS_URL);
        if (dataDir) rmSync(dataDir, { recursive: true, force: true });
      }
    }
  } finally {
    await stop(mock.child);
  }
  report(rows, (Date.now() - started) / 1000);
}

function report(rows: Row[], seconds: number) {
  const lines: string[] = [];
  lines.push(`Chat overhead — ${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), Node ${process.versions.node}`);
  lines.push(`Mock upstream latency ${LATENCY_MS} ms; ${SECONDS} s per run; total ${seconds.toFixed(0)} s.`);
  lines.push("");
  lines.push("| storage | mode | c | direct p50 ms | gateway p50 ms | added p50 ms | direct p99 ms | gateway p99 ms | added p99 ms | direct req/s | gateway req/s | gateway/direct |");
  lines.push("|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const row of rows) {
    const { direct, gateway } = row;
    lines.push(
      `| ${row.storage} | ${row.stream ? "SSE" : "JSON"} | ${row.concurrency} | ${ms(direct.p50)} | ${ms(gateway.p50)} | ${ms(gateway.p50 - direct.p50)} | ` +
        `${ms(direct.p99)} | ${ms(gateway.p99)} | ${ms(gateway.p99 - direct.p99)} | ${Math.round(direct.rps)} | ${Math.round(gateway.rps)} | ${((100 * gateway.rps) / direct.rps).toFixed(0)}% |`,
    );
  }
  lines.push("");
  lines.push("Targets:");
  const verdict = (ok: boolean) => (ok ? "met" : "NOT met");
  for (const row of rows) {
    const label = `${row.storage} ${row.stream ? "SSE" : "JSON"}`;
    const { direct, gateway } = row;
    if (row.concurrency === 1) {
      const added = gateway.p50 - direct.p50;
      lines.push(`- ${label} c=1: added p50 ${ms(added)} ms ≤ ${TARGETS.addedP50AtC1Ms} ms — ${verdict(added <= TARGETS.addedP50AtC1Ms)}`);
    }
    if (row.concurrency === 16) {
      const added = gateway.p99 - direct.p99;
      lines.push(`- ${label} c=16: added p99 ${ms(added)} ms ≤ ${TARGETS.addedP99AtC16Ms} ms — ${verdict(added <= TARGETS.addedP99AtC16Ms)}`);
    }
    if (row.concurrency === 64) {
      const ratio = gateway.rps / direct.rps;
      lines.push(`- ${label} c=64: throughput ${(100 * ratio).toFixed(0)}% of direct ≥ ${100 * TARGETS.throughputRatioAtC64}% — ${verdict(ratio >= TARGETS.throughputRatioAtC64)}`);
    }
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
