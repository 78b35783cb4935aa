/**
 * Chat overhead benchmark: what the gateway adds to a chat completion, and what it costs the
 * gateway's process. Two surfaces: Platform (POST /api/v1/chat/completions with a Platform
 * key: auth, rpm and tpm limits, credit hold and metering all on) and Gateway (POST
 * /gateway/v1/chat/completions with a gateway key `sk_…`: auth and the user's plan
 * allowance), each in front of a local OpenAI-compatible mock with a fixed latency, against
 * the same mock called directly. Concurrency 1, 16 and 64 for JSON, 16 for SSE, on
 * STORAGE=memory, fs and redis. The gateway and the mock each run in a child process;
 * autocannon drives the load from this one. The gateway's CPU time per request is read from
 * /proc/<pid>/stat (utime + stime) before and after each measured run, a figure that holds
 * on a noisy machine where latencies do not. Loopback only.
 *
 *   npm run bench:chat
 *
 * Environment: BENCH_SECONDS (per measured run, default 5), BENCH_WARMUP_SECONDS (default 1, before each
 * run), BENCH_SERVER_WARMUP_SECONDS (default 2: each surface and mode of a new gateway, before any is measured),
 * BENCH_STORAGES (default "memory,fs,redis"), BENCH_SURFACES (default "platform,gateway"),
 * BENCH_MODES (default "json,sse"), BENCH_CONCURRENCY (JSON, default "1,16,64"),
 * BENCH_SSE_CONCURRENCY (default "16"), MOCK_LATENCY_MS (default 2), REDIS_URL (default
 * redis://127.0.0.1:6379), BENCH_SERVER_EXEC_ARGV (extra Node flags for the gateway, e.g.
 * "--cpu-prof --cpu-prof-dir=/tmp/prof"), BENCH_FLOOR=0 (skip the floor row), BENCH_DEPLOYMENTS
 * (default 1; 2 routes the model across two deployments of the mock), BENCH_TRACING (default
 * "off"; a list such as "off,0.1" measures each setting in the same run: a number starts the
 * gateway with OpenTelemetry tracing at that sampling ratio, `parentbased_traceidratio`,
 * exporting OTLP/HTTP protobuf to a receiver in this process that reads and drops the spans).
 *
 * First, unless BENCH_FLOOR=0, a `floor` row for JSON: bench/internal/floor-proxy.ts, a bare
 * `node:http` server relaying to the mock through the same undici client with no storage,
 * limits, metering, logs or metrics — what Node's HTTP server and client alone cost here, the
 * part of the gateway's figure no Node gateway can remove.
 */
import type { ChildProcess } from "node:child_process";
import { forkReady } from "./internal/fork-ready.js";
import { once } from "node:events";
import { randomUUID } from "node:crypto";
import { cpus, tmpdir } from "node:os";
import { execSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import autocannon from "autocannon";
import { dropRedisPrefix } from "../test/helpers/redis.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
/**
 * Load on every surface and mode of a new gateway before any of them is measured, so no row
 * carries the optimising compiler's first passes over the shared path (with 1 s of warm-up
 * alone, whichever surface was measured first cost 15–50 % more).
 */
const SERVER_WARMUP_SECONDS = Number(process.env.BENCH_SERVER_WARMUP_SECONDS ?? 2);
const list = (value: string) =>
  value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
const STORAGES = list(process.env.BENCH_STORAGES ?? "memory,fs,redis");
const SURFACES = list(process.env.BENCH_SURFACES ?? "platform,gateway") as Surface[];
const MODES = list(process.env.BENCH_MODES ?? "json,sse");
const CONCURRENCY = list(process.env.BENCH_CONCURRENCY ?? "1,16,64").map(Number);
const SSE_CONCURRENCY = list(process.env.BENCH_SSE_CONCURRENCY ?? "16").map(Number);
const LATENCY_MS = Number(process.env.MOCK_LATENCY_MS ?? 2);
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const MODEL = "bench-model";
/** BENCH_DEPLOYMENTS=2: the model lists two deployments of the mock, weighted 1:1 (docs/providers.md). */
const DEPLOYMENTS = Number(process.env.BENCH_DEPLOYMENTS ?? 1);
/** BENCH_TRACING: "off" and/or sampling ratios; each is a gateway of its own, measured in this run. */
const TRACING = list(process.env.BENCH_TRACING ?? "off");

/** An OTLP/HTTP endpoint that reads every export and drops it; counts the bytes it got. */
async function traceSink(): Promise<{ endpoint: string; bytes: () => number; close: () => void }> {
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on("data", (chunk: Buffer) => (bytes += chunk.length));
    req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bytes: () => bytes,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** The gateway's environment for one tracing setting (the OTEL_* variables an operator would set). */
function tracingEnv(setting: string, endpoint: string): Record<string, string | undefined> {
  if (setting === "off") return { OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: undefined };
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: setting,
  };
}

function benchModel(baseURL: string) {
  if (DEPLOYMENTS <= 1) return { provider: "openai-compatible", baseURL, ownedBy: "bench" };
  return {
    deployments: Array.from({ length: DEPLOYMENTS }, () => ({ provider: "openai-compatible", baseURL, weight: 1 })),
    ownedBy: "bench",
  };
}

const TARGETS = { addedP50AtC1Ms: 0.5, cpuUsAtC16: { memory: 150, fs: 150, redis: 250 } as Record<string, number> };
type Surface = "platform" | "gateway" | "floor";
const PATHS: Record<Surface, string> = {
  platform: "/api/v1/chat/completions",
  gateway: "/gateway/v1/chat/completions",
  floor: "/v1/chat/completions",
};
/** The floor row (bench/internal/floor-proxy.ts): a bare Node proxy, what Node alone costs. */
const FLOOR = process.env.BENCH_FLOOR !== "0";
const CLOCK_TICKS = Number(execSync("getconf CLK_TCK").toString().trim()) || 100;

/** utime + stime of a process in microseconds (fields 14 and 15 of /proc/<pid>/stat). */
function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) may hold spaces; the fields after it start past its ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS;
}

function spawn(script: string, env: Record<string, string | undefined>): Promise<{ child: ChildProcess; words: string[] }> {
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
    throw new Error(
      `${url} at c=${connections}: ${failures} non-2xx (${firstFailure}), ${result.errors} errors, ${result.timeouts} timeouts`,
    );
  }
  latencies.sort((a, b) => a - b);
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    rps: latencies.length / result.duration,
    requests: latencies.length,
  };
}

/** One request each way before measuring, so a broken setup fails loudly instead of benchmarking errors. */
async function check(url: string, headers: Record<string, string>, stream: boolean): Promise<void> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: body(stream) });
  const text = await res.text();
  const ok =
    res.status === 200 &&
    text.includes(stream ? "mock" : "Hello from the mock model.") &&
    (!stream || text.trimEnd().endsWith("data: [DONE]"));
  if (!ok) throw new Error(`${url} (stream ${stream}) answered ${res.status}: ${text.slice(0, 500)}`);
}

interface Row {
  storage: string;
  /** "off", or the sampling ratio the gateway traced at. */
  tracing: string;
  surface: Surface;
  stream: boolean;
  concurrency: number;
  direct: Run;
  gateway: Run;
  /** Gateway CPU time (user + system) per successful request, µs. */
  cpuUs: number;
}

const ms = (value: number) => value.toFixed(2);

async function main() {
  const started = Date.now();
  const mock = await spawn("bench/internal/mock-upstream.ts", { MOCK_LATENCY_MS: String(LATENCY_MS) });
  const mockOrigin = mock.words[0]!;
  const directUrl = `${mockOrigin}/v1/chat/completions`;
  const rows: Row[] = [];
  const sink = await traceSink();
  try {
    if (FLOOR && MODES.includes("json")) {
      const floor = await spawn("bench/internal/floor-proxy.ts", { UPSTREAM: mockOrigin, KEY: "floor-key" });
      try {
        await measure(
          rows,
          "none",
          "off",
          "floor",
          floor.child.pid!,
          `${floor.words[0]}${PATHS.floor}`,
          { authorization: "Bearer floor-key" },
          directUrl,
          false,
        );
      } finally {
        await stop(floor.child);
      }
    }
    for (const storage of STORAGES)
      for (const tracing of TRACING) {
        const prefix = `bench-chat-${randomUUID().slice(0, 8)}`;
        const dataDir = storage === "fs" ? mkdtempSync(join(tmpdir(), "bench-chat-")) : undefined;
        const gateway = await spawn("bench/internal/chat-server.ts", {
          STORAGE: storage,
          REDIS_URL,
          REDIS_PREFIX: prefix,
          ...(dataDir ? { DATA_DIR: dataDir } : {}),
          // Every stream still takes and gives back its place (docs/quotas.md); none is refused at BENCH_SSE_CONCURRENCY.
          QUOTA_STREAMS_PER_KEY: "100000",
          QUOTA_STREAMS_PER_USER: "100000",
          QUOTA_STREAMS_PER_TENANT: "100000",
          MODELS_JSON: JSON.stringify({ models: { [MODEL]: benchModel(`${mockOrigin}/v1`) } }),
          ...tracingEnv(tracing, sink.endpoint),
        });
        const [origin, platformKey, gatewayKey] = gateway.words as [string, string, string];
        const pid = gateway.child.pid!;
        try {
          if (SERVER_WARMUP_SECONDS > 0)
            for (const surface of SURFACES)
              for (const stream of MODES.map((mode) => mode === "sse")) {
                const auth = { authorization: `Bearer ${surface === "platform" ? platformKey : gatewayKey}` };
                await load(`${origin}${PATHS[surface]}`, auth, body(stream), 16, SERVER_WARMUP_SECONDS);
              }
          for (const surface of SURFACES) {
            const gatewayUrl = `${origin}${PATHS[surface]}`;
            const auth = { authorization: `Bearer ${surface === "platform" ? platformKey : gatewayKey}` };
            for (const stream of MODES.map((mode) => mode === "sse")) {
              for (const concurrency of stream ? SSE_CONCURRENCY : CONCURRENCY) {
                await measure(rows, storage, tracing, surface, pid, gatewayUrl, auth, directUrl, stream, concurrency);
              }
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
    sink.close();
  }
  report(rows, (Date.now() - started) / 1000);
  if (sink.bytes() > 0) process.stdout.write(`Spans exported: ${sink.bytes()} bytes of OTLP protobuf.\n`);
}

/** One row: the direct call and the gateway at `concurrency` (all JSON concurrencies when omitted). */
async function measure(
  rows: Row[],
  storage: string,
  tracing: string,
  surface: Surface,
  pid: number,
  gatewayUrl: string,
  auth: Record<string, string>,
  directUrl: string,
  stream: boolean,
  only?: number,
) {
  await check(directUrl, {}, stream);
  await check(gatewayUrl, auth, stream);
  for (const concurrency of only !== undefined ? [only] : CONCURRENCY) {
    const payload = body(stream);
    if (WARMUP_SECONDS > 0) {
      await load(gatewayUrl, auth, payload, concurrency, WARMUP_SECONDS);
      await load(directUrl, {}, payload, concurrency, WARMUP_SECONDS);
    }
    const direct = await load(directUrl, {}, payload, concurrency, SECONDS);
    const cpuBefore = cpuMicros(pid);
    const viaGateway = await load(gatewayUrl, auth, payload, concurrency, SECONDS);
    const cpuUs = (cpuMicros(pid) - cpuBefore) / viaGateway.requests;
    rows.push({ storage, tracing, surface, stream, concurrency, direct, gateway: viaGateway, cpuUs });
    process.stderr.write(
      `${storage.padEnd(6)} tracing ${tracing.padEnd(4)} ${surface.padEnd(8)} ${(stream ? "sse" : "json").padEnd(4)} c=${String(concurrency).padEnd(3)} ` +
        `direct p50 ${ms(direct.p50)} p99 ${ms(direct.p99)} ${Math.round(direct.rps)}/s | ` +
        `gateway p50 ${ms(viaGateway.p50)} p99 ${ms(viaGateway.p99)} ${Math.round(viaGateway.rps)}/s, ${Math.round(cpuUs)} µs CPU/req\n`,
    );
  }
}

function report(rows: Row[], seconds: number) {
  const lines: string[] = [];
  lines.push(
    `Chat overhead — ${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), Node ${process.versions.node}`,
  );
  lines.push(`Mock upstream latency ${LATENCY_MS} ms; ${SECONDS} s per run; total ${seconds.toFixed(0)} s.`);
  lines.push("");
  lines.push(
    "| storage | tracing | surface | mode | c | gateway req/s | direct req/s | gateway p50 ms | added p50 ms | gateway p99 ms | added p99 ms | gateway CPU µs/req |",
  );
  lines.push("|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const row of rows) {
    const { direct, gateway } = row;
    lines.push(
      `| ${row.storage} | ${row.tracing} | ${row.surface} | ${row.stream ? "SSE" : "JSON"} | ${row.concurrency} | ${Math.round(gateway.rps)} | ${Math.round(direct.rps)} | ` +
        `${ms(gateway.p50)} | ${ms(gateway.p50 - direct.p50)} | ${ms(gateway.p99)} | ${ms(gateway.p99 - direct.p99)} | ${Math.round(row.cpuUs)} |`,
    );
  }
  lines.push("");
  lines.push("Targets:");
  const verdict = (ok: boolean) => (ok ? "met" : "NOT met");
  for (const row of rows) {
    const label = `${row.storage}${row.tracing === "off" ? "" : ` tracing ${row.tracing}`} ${row.surface} ${row.stream ? "SSE" : "JSON"}`;
    if (row.concurrency === 1) {
      const added = row.gateway.p50 - row.direct.p50;
      lines.push(`- ${label} c=1: added p50 ${ms(added)} ms ≤ ${TARGETS.addedP50AtC1Ms} ms — ${verdict(added <= TARGETS.addedP50AtC1Ms)}`);
    }
    const cpuTarget = TARGETS.cpuUsAtC16[row.storage];
    if (row.concurrency === 16 && !row.stream && cpuTarget) {
      lines.push(`- ${label} c=16: gateway CPU ${Math.round(row.cpuUs)} µs/request ≤ ${cpuTarget} µs — ${verdict(row.cpuUs <= cpuTarget)}`);
    }
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
