/**
 * Long streams benchmark: N concurrent chat streams of K content chunks, GAP ms apart, through
 * the gateway, beside a bare `node:http` relay (the floor) in the same run. For each storage
 * (memory, fs, Redis) and each surface (Platform, Account, Gateway) it opens the N streams at
 * once (or over BENCH_RAMP_MS), reads every one to its end, and reports:
 *
 * - CPU per stream and per relayed frame: utime + stime of the server process from
 *   /proc/<pid>/stat over the run (request admission, every frame, settlement), divided by the
 *   streams (and by their frames);
 * - RSS per open stream: the process's peak VmRSS during the run less its VmRSS before, / N
 *   (garbage not yet collected included); with BENCH_HEAP=1 also the heap and buffers in use
 *   after a full collection once every stream is open, less the same before the run, / N
 *   (the collection itself then shows in that run's loop delay);
 * - first-chunk latency p50/p99 (request sent → first body bytes at the client), and what
 *   the gateway adds over the floor's figure of the same run;
 * - event-loop delay p50/p99/max inside the server during the run (perf_hooks histogram,
 *   read over IPC: bench/internal/loop-delay.ts).
 *
 * The mock provider (bench/internal/mock-upstream.ts) and the servers each run in their own
 * process; the streams are opened from this one through an undici Agent with one socket per
 * stream. Before measuring, each server serves one unmeasured run of N streams on every surface
 * (so every run finds its N connections open, client side and upstream, and the code compiled). The floor (bench/internal/floor-proxy.ts) pipes the upstream's bytes to the client
 * with no auth, storage, metering, logs or metrics; it is measured first and last, and the
 * gateway rows are compared with the mean of the two. Loopback only.
 *
 *   npm run bench:streams
 *
 * Environment: BENCH_STREAMS (N, default 1000), BENCH_CHUNKS (K, default 20), BENCH_GAP_MS
 * (default 100), BENCH_RAMP_MS (spread the N requests over this long, default 0: all at once),
 * BENCH_STORAGES (default "memory,fs,redis"), BENCH_SURFACES (default "platform,account,gateway"),
 * BENCH_HEAP=1 (the live-memory probe above), BENCH_WARMUP=0 (skip the unmeasured run before measuring), BENCH_FLOOR=0 (skip the
 * floor), REDIS_URL (default redis://127.0.0.1:6379), BENCH_SERVER_EXEC_ARGV (extra Node flags
 * for the gateway, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"), BENCH_FLOOR_EXEC_ARGV (the same for the floor),
 * BENCH_TSX=1 (run the processes from the sources through tsx instead of compiled: bench/internal/fork-ready.ts),
 * BENCH_ROUNDS (default 1: measure every row this many times on the same server, the surfaces
 * taking turns, and report each figure's median with the CPU's range; a run on this machine
 * moves by 10–30 %, so comparisons of a few per cent need several).
 */
import type { ChildProcess } from "node:child_process";
import { execSync } from "node:child_process";
import { once } from "node:events";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "undici";
import { dropRedisPrefix } from "../test/helpers/redis.js";
import { forkReady } from "./internal/fork-ready.js";

const list = (value: string) =>
  value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
const N = Number(process.env.BENCH_STREAMS ?? 1000);
const K = Number(process.env.BENCH_CHUNKS ?? 20);
const GAP_MS = Number(process.env.BENCH_GAP_MS ?? 100);
const RAMP_MS = Number(process.env.BENCH_RAMP_MS ?? 0);
const WARMUP = process.env.BENCH_WARMUP !== "0";
const STORAGES = list(process.env.BENCH_STORAGES ?? "memory,fs,redis");
const SURFACES = list(process.env.BENCH_SURFACES ?? "platform,account,gateway") as Surface[];
const FLOOR = process.env.BENCH_FLOOR !== "0";
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const HEAP = process.env.BENCH_HEAP === "1";
const ROUNDS = Math.max(1, Math.floor(Number(process.env.BENCH_ROUNDS ?? 1)) || 1);
const EXEC_ARGV = [
  ...(process.env.BENCH_SERVER_EXEC_ARGV ? process.env.BENCH_SERVER_EXEC_ARGV.split(" ") : []),
  ...(HEAP ? ["--expose-gc"] : []),
];
const MODEL = "bench-model";
const CLOCK_TICKS = Number(execSync("getconf CLK_TCK").toString().trim()) || 100;
const PAGE_KIB = 1;

type Surface = "platform" | "account" | "gateway" | "floor";
const PATHS: Record<Surface, string> = {
  platform: "/api/v1/chat/completions",
  account: "/account/v1/chat/completions",
  gateway: "/gateway/v1/chat/completions",
  floor: "/v1/chat/completions",
};
/** The issue's targets on this machine, against the floor of the same run. */
const TARGETS = { cpuPerStreamVsFloor: 1.5, addedFirstChunkP99Ms: 100, loopDelayP99Ms: 50, kibPerStream: 32 };

/** utime + stime of a process in microseconds (fields 14 and 15 of /proc/<pid>/stat). */
function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS;
}

/** VmRSS of a process, KiB. */
function rssKiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) * PAGE_KIB : NaN;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/** Asks a server process (bench/internal/loop-delay.ts) over IPC and waits for its answer. */
function ask(child: ChildProcess, what: "reset" | "read" | "heap"): Promise<{ p50: number; p99: number; max: number; heapKiB: number }> {
  return new Promise((resolve) => {
    const onMessage = (message: { loopDelay?: unknown }) => {
      if (message?.loopDelay === undefined) return;
      child.off("message", onMessage);
      resolve(message.loopDelay as { p50: number; p99: number; max: number; heapKiB: number });
    };
    child.on("message", onMessage);
    child.send({ loopDelay: what });
  });
}

const payload = (surface: Surface) =>
  JSON.stringify({
    model: MODEL,
    messages: [
      { role: "system", content: "You are a helpful assistant." },
      { role: "user", content: "Count to twenty." },
    ],
    max_tokens: 64,
    stream: true,
    // The usage chunk reaches the client where the surface carries it (not on the Platform).
    ...(surface === "account" || surface === "gateway" ? { stream_options: { include_usage: true } } : {}),
  });

const client = new Agent({ connections: null, keepAliveTimeout: 60_000, headersTimeout: 120_000, bodyTimeout: 120_000 });

/** Requests sent again after the keep-alive race (reported with the run). */
let resent = 0;

interface StreamResult {
  firstMs: number;
  tokens: number;
  frames: number;
  done: boolean;
}

/** One stream, read to its end: time to its first body bytes, its content frames, its [DONE]. */
async function oneStream(origin: string, surface: Surface, auth: string, body: string): Promise<StreamResult> {
  let started = performance.now();
  const send = () =>
    client.request({
      origin,
      path: PATHS[surface],
      method: "POST",
      headers: { "content-type": "application/json", authorization: auth },
      body,
    });
  let answer: Awaited<ReturnType<typeof send>>;
  try {
    answer = await send();
  } catch (error) {
    // A kept-alive socket the server closed as it was reused (the usual keep-alive race): the
    // request never reached the server, so it is sent again once on a new connection.
    const code = (error as { code?: string }).code;
    if (code !== "UND_ERR_SOCKET" && code !== "ECONNRESET") throw error;
    resent++;
    started = performance.now();
    answer = await send();
  }
  if (answer.statusCode !== 200) throw new Error(`${surface} answered ${answer.statusCode}: ${(await answer.body.text()).slice(0, 300)}`);
  let firstMs = Number.NaN;
  let text = "";
  for await (const part of answer.body) {
    if (Number.isNaN(firstMs)) firstMs = performance.now() - started;
    text += String(part);
  }
  return {
    firstMs,
    tokens: text.split('"content":" token"').length - 1,
    frames: text.split("data: ").length - 1,
    done: text.endsWith("data: [DONE]\n\n"),
  };
}

/** `count` streams, all at once or spread over `rampMs`; throws unless every one is whole. */
async function streams(origin: string, surface: Surface, auth: string, count: number, rampMs: number): Promise<StreamResult[]> {
  const body = payload(surface);
  const all: Promise<StreamResult>[] = [];
  for (let i = 0; i < count; i++) {
    if (rampMs > 0 && i > 0 && i % 50 === 0) await new Promise((resolve) => setTimeout(resolve, (rampMs * 50) / count));
    all.push(oneStream(origin, surface, auth, body));
  }
  const results = await Promise.all(all);
  const broken = results.filter((result) => result.tokens !== K || !result.done);
  if (broken.length) throw new Error(`${surface}: ${broken.length} of ${count} streams incomplete (${JSON.stringify(broken[0])})`);
  return results;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" ");

interface Row {
  /** Rows of one server and surface (the rounds), reported as one. */
  group: string;
  /** CPU per stream, lowest and highest of the rounds. */
  cpuRange: [number, number];
  storage: string;
  surface: Surface;
  cpuPerStreamUs: number;
  cpuPerFrameUs: number;
  kibPerStream: number;
  heapKiBPerStream: number;
  firstP50: number;
  firstP99: number;
  loop: { p50: number; p99: number; max: number };
  seconds: number;
  loadBefore: string;
  loadAfter: string;
}

async function measure(rows: Row[], storage: string, surface: Surface, child: ChildProcess, origin: string, auth: string) {
  const pid = child.pid!;
  const rssBefore = rssKiB(pid);
  let rssPeak = rssBefore;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, rssKiB(pid));
  }, 50);
  const loadBefore = load();
  const heapBefore = HEAP ? (await ask(child, "heap")).heapKiB : 0;
  let heapOpen = 0;
  // BENCH_HEAP=1: once every stream is open (its first chunk arrived, a few gaps before the
  // end), the server collects its garbage and reports what it holds.
  const probe = HEAP
    ? setTimeout(() => void ask(child, "heap").then((heap) => (heapOpen = heap.heapKiB)), Math.max(0, (K * GAP_MS) / 2))
    : undefined;
  await ask(child, "reset");
  const started = performance.now();
  const cpuBefore = cpuMicros(pid);
  let results: StreamResult[];
  let cpu: number;
  try {
    results = await streams(origin, surface, auth, N, RAMP_MS);
    // Settlement runs once the last byte left: let it finish before reading the CPU time.
    await new Promise((resolve) => setTimeout(resolve, 300));
    cpu = cpuMicros(pid) - cpuBefore;
  } finally {
    clearInterval(sampler);
    clearTimeout(probe);
  }
  const seconds = (performance.now() - started) / 1000;
  const loop = await ask(child, "read");
  const firsts = results.map((result) => result.firstMs).sort((a, b) => a - b);
  const frames = results.reduce((sum, result) => sum + result.frames, 0);
  const row: Row = {
    group: `${child.pid}/${surface}`,
    cpuRange: [cpu / N, cpu / N],
    storage,
    surface,
    cpuPerStreamUs: cpu / N,
    cpuPerFrameUs: cpu / frames,
    kibPerStream: (rssPeak - rssBefore) / N,
    heapKiBPerStream: HEAP && heapOpen ? (heapOpen - heapBefore) / N : Number.NaN,
    firstP50: percentile(firsts, 50),
    firstP99: percentile(firsts, 99),
    loop,
    seconds,
    loadBefore,
    loadAfter: load(),
  };
  rows.push(row);
  process.stderr.write(
    `${storage.padEnd(6)} ${surface.padEnd(8)} ${Math.round(row.cpuPerStreamUs)} µs/stream ${row.cpuPerFrameUs.toFixed(1)} µs/frame ` +
      `${row.kibPerStream.toFixed(1)} KiB/stream first p50 ${row.firstP50.toFixed(0)} p99 ${row.firstP99.toFixed(0)} ms ` +
      `loop p99 ${loop.p99} max ${loop.max} ms (${seconds.toFixed(1)} s, load ${row.loadBefore} → ${row.loadAfter})\n`,
  );
}

async function floorRun(rows: Row[], mockOrigin: string) {
  const floor = await forkReady("bench/internal/floor-proxy.ts", { UPSTREAM: mockOrigin, KEY: "floor-key", FLOOR_CONNECTIONS: "100000" }, [
    ...(HEAP ? ["--expose-gc"] : []),
    ...(process.env.BENCH_FLOOR_EXEC_ARGV?.split(" ") ?? []),
  ]);
  try {
    const origin = floor.words[0]!;
    if (WARMUP) await streams(origin, "floor", "Bearer floor-key", N, 0);
    for (let round = 0; round < ROUNDS; round++) await measure(rows, "none", "floor", floor.child, origin, "Bearer floor-key");
  } finally {
    await stop(floor.child);
  }
}

async function main() {
  const started = Date.now();
  const mock = await forkReady("bench/internal/mock-upstream.ts", {
    MOCK_LATENCY_MS: "2",
    MOCK_STREAM_CHUNKS: String(K),
    MOCK_STREAM_GAP_MS: String(GAP_MS),
  });
  const mockOrigin = mock.words[0]!;
  const rows: Row[] = [];
  try {
    if (FLOOR) await floorRun(rows, mockOrigin);
    for (const storage of STORAGES) {
      const prefix = `bench-streams-${randomUUID().slice(0, 8)}`;
      const dataDir = storage === "fs" ? mkdtempSync(join(tmpdir(), "bench-streams-")) : undefined;
      const gateway = await forkReady(
        "bench/internal/chat-server.ts",
        {
          STORAGE: storage,
          REDIS_URL,
          REDIS_PREFIX: prefix,
          ...(dataDir ? { DATA_DIR: dataDir } : {}),
          // Every stream still takes and gives back its place (docs/quotas.md); none is refused at N.
          QUOTA_STREAMS_PER_KEY: String(Math.max(100_000, N * 2)),
          QUOTA_STREAMS_PER_USER: String(Math.max(100_000, N * 2)),
          QUOTA_STREAMS_PER_TENANT: String(Math.max(100_000, N * 2)),
          MODELS_JSON: JSON.stringify({
            models: { [MODEL]: { provider: "openai-compatible", baseURL: `${mockOrigin}/v1`, ownedBy: "bench" } },
          }),
        },
        EXEC_ARGV,
      );
      const [origin, platformKey, gatewayKey, accountKey] = gateway.words as [string, string, string, string];
      const auth: Record<string, string> = {
        platform: `Bearer ${platformKey}`,
        account: `Bearer ${accountKey}`,
        gateway: `Bearer ${gatewayKey}`,
      };
      try {
        // Unmeasured: N streams on every surface (the connections opened, every surface's code
        // compiled and optimised: with one run on the first surface only, whichever surface was
        // measured first still paid the compiler's later tiers and came out 10-20 % dearer).
        // The runs follow at once, so the connections are not idle long enough for the
        // server's keep-alive timeout (5 s) to close them.
        if (WARMUP) for (const surface of SURFACES) await streams(origin, surface, auth[surface]!, N, 0);
        for (let round = 0; round < ROUNDS; round++)
          for (const surface of SURFACES) await measure(rows, storage, surface, gateway.child, origin, auth[surface]!);
      } finally {
        await stop(gateway.child);
        if (storage === "redis") await dropRedisPrefix(prefix, REDIS_URL);
        if (dataDir) rmSync(dataDir, { recursive: true, force: true });
      }
    }
    if (FLOOR && STORAGES.length) await floorRun(rows, mockOrigin);
  } finally {
    await stop(mock.child);
    await client.close();
  }
  report(medians(rows), (Date.now() - started) / 1000);
}

const round2 = (value: number) => Math.round(value * 100) / 100;

/** One row per server and surface: the median of each figure over its rounds, the CPU's range beside it. */
function medians(rows: Row[]): Row[] {
  const groups = new Map<string, Row[]>();
  for (const row of rows) groups.set(row.group, [...(groups.get(row.group) ?? []), row]);
  return [...groups.values()].map((group) => {
    if (group.length === 1) return group[0]!;
    const median = (pick: (row: Row) => number) => {
      const sorted = group.map(pick).sort((a, b) => a - b);
      const middle = Math.floor(sorted.length / 2);
      return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
    };
    const cpus = group.map((row) => row.cpuPerStreamUs);
    return {
      ...group[0]!,
      cpuRange: [Math.min(...cpus), Math.max(...cpus)],
      cpuPerStreamUs: median((row) => row.cpuPerStreamUs),
      cpuPerFrameUs: median((row) => row.cpuPerFrameUs),
      kibPerStream: median((row) => row.kibPerStream),
      heapKiBPerStream: median((row) => row.heapKiBPerStream),
      firstP50: median((row) => row.firstP50),
      firstP99: median((row) => row.firstP99),
      loop: {
        p50: round2(median((row) => row.loop.p50)),
        p99: round2(median((row) => row.loop.p99)),
        max: round2(median((row) => row.loop.max)),
      },
      seconds: group.reduce((sum, row) => sum + row.seconds, 0),
      loadAfter: group.at(-1)!.loadAfter,
    };
  });
}

function report(rows: Row[], seconds: number) {
  const floors = rows.filter((row) => row.surface === "floor");
  const mean = (pick: (row: Row) => number) => (floors.length ? floors.reduce((sum, row) => sum + pick(row), 0) / floors.length : NaN);
  const floorCpu = mean((row) => row.cpuPerStreamUs);
  const floorP50 = mean((row) => row.firstP50);
  const floorP99 = mean((row) => row.firstP99);
  const lines: string[] = [];
  lines.push(
    `Long streams — ${new Date().toISOString().slice(0, 16)}Z, ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), Node ${process.versions.node}`,
  );
  lines.push(
    `${N} concurrent streams × ${K} chunks ${GAP_MS} ms apart${RAMP_MS ? `, opened over ${RAMP_MS} ms` : ", opened at once"}` +
      `${ROUNDS > 1 ? `; ${ROUNDS} rounds per row, medians (the CPU range in parentheses)` : ""}; total ${seconds.toFixed(0)} s.`,
  );
  lines.push("");
  lines.push(
    "| storage | surface | CPU µs/stream | × floor | CPU µs/frame | RSS KiB/stream | heap KiB/stream | first chunk p50 / p99 ms | " +
      "added p50 / p99 ms | loop delay p50 / p99 / max ms | load avg (1/5/15) before → after |",
  );
  lines.push("|---|---|---|---|---|---|---|---|---|---|---|");
  for (const row of rows) {
    const floor = row.surface === "floor";
    lines.push(
      `| ${row.storage} | ${row.surface} | ${Math.round(row.cpuPerStreamUs)}${ROUNDS > 1 ? ` (${row.cpuRange.map(Math.round).join("–")})` : ""} | ` +
        `${floor ? "—" : (row.cpuPerStreamUs / floorCpu).toFixed(2)} | ` +
        `${row.cpuPerFrameUs.toFixed(1)} | ${row.kibPerStream.toFixed(1)} | ` +
        `${Number.isNaN(row.heapKiBPerStream) ? "—" : row.heapKiBPerStream.toFixed(1)} | ${row.firstP50.toFixed(0)} / ${row.firstP99.toFixed(0)} | ` +
        `${floor ? "—" : `${(row.firstP50 - floorP50).toFixed(0)} / ${(row.firstP99 - floorP99).toFixed(0)}`} | ` +
        `${row.loop.p50} / ${row.loop.p99} / ${row.loop.max} | ${row.loadBefore} → ${row.loadAfter} |`,
    );
  }
  lines.push("");
  lines.push(`Targets (against the floor's mean: ${Math.round(floorCpu)} µs/stream, first chunk p99 ${floorP99.toFixed(0)} ms):`);
  const verdict = (ok: boolean) => (ok ? "met" : "NOT met");
  for (const row of rows.filter((r) => r.surface !== "floor")) {
    const ratio = row.cpuPerStreamUs / floorCpu;
    const added = row.firstP99 - floorP99;
    lines.push(
      `- ${row.storage} ${row.surface}: CPU ${ratio.toFixed(2)}× ≤ ${TARGETS.cpuPerStreamVsFloor}× ${verdict(ratio <= TARGETS.cpuPerStreamVsFloor)}; ` +
        `first chunk added p99 ${added.toFixed(0)} ≤ ${TARGETS.addedFirstChunkP99Ms} ms ${verdict(added <= TARGETS.addedFirstChunkP99Ms)}; ` +
        `loop delay p99 ${row.loop.p99} ≤ ${TARGETS.loopDelayP99Ms} ms ${verdict(row.loop.p99 <= TARGETS.loopDelayP99Ms)}; ` +
        (Number.isNaN(row.heapKiBPerStream)
          ? `RSS ${row.kibPerStream.toFixed(1)} ≤ ${TARGETS.kibPerStream} KiB/stream ${verdict(row.kibPerStream <= TARGETS.kibPerStream)}`
          : `heap ${row.heapKiBPerStream.toFixed(1)} ≤ ${TARGETS.kibPerStream} KiB/stream ${verdict(row.heapKiBPerStream <= TARGETS.kibPerStream)}`),
    );
  }
  if (resent) lines.push(`(${resent} requests were sent again after their kept-alive connection closed as it was reused.)`);
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
