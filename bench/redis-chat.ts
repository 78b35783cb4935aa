/**
 * What a chat costs Redis (docs/benchmarks.md "Redis per chat"): for a Platform, an Account and
 * a Gateway chat completion, JSON and streamed, the Redis round trips the gateway makes before
 * the upstream call and in all, the commands Redis runs per request (those inside scripts
 * included), and Redis's own CPU per request, beside the gateway's CPU and a bare Node relay's
 * (bench/internal/floor-proxy.ts) measured in the same run. Loopback only.
 *
 *   npm run bench:redis
 *
 * Redis is a redis-server of this run's own (no persistence), so its CPU (utime + stime from
 * /proc/<pid>/stat) and its INFO commandstats are this gateway's alone. The Platform key has
 * rpm and tpm limits (every limit checked, none trips) and the workspace credits, as in
 * bench/chat-overhead.ts.
 *
 * Round trips are read from one request at a time with MONITOR: every command a connection of
 * the gateway sent (a MULTI … EXEC block counts once: ioredis writes it in one go; commands
 * run inside a script are not round trips), split at the time the mock upstream received the
 * request (`GET /arrivals`, the same clock). Commands and CPU per request come from a loaded
 * run (BENCH_CONCURRENCY, default 16, BENCH_SECONDS each, default 5).
 *
 * One gateway process keeps Redis mostly idle, so its Redis CPU per request is mostly Redis
 * waking up for each command; two more figures tell the parts apart: the same number of round
 * trips as PINGs at the same rate (`pacedPings`: the wake-ups alone), and the traced request's
 * own commands replayed with Redis kept busy (`replay`: what the commands cost, as when many
 * instances share one Redis, and how many such requests one Redis serves per second). The
 * target is read on the replay.
 *
 * Environment: BENCH_SECONDS, BENCH_WARMUP_SECONDS (default 1), BENCH_CONCURRENCY,
 * BENCH_SURFACES (default "platform,account,gateway"), BENCH_MODES (default "json,sse"),
 * BENCH_TRACES (requests traced with MONITOR per row, default 5), MOCK_LATENCY_MS (default 2),
 * BENCH_REPLAY_CONNECTIONS (default 4), BENCH_REPLAY_CONCURRENCY (requests in flight on each, default 16) and
 * BENCH_REPLAY_ROUNDS (default 3: the median is reported, with the lowest and highest).
 */
import { execSync } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import type { ChildProcess } from "node:child_process";
import autocannon from "autocannon";
import { connect } from "node:net";
import { Redis } from "ioredis";
import { forkReady } from "./internal/fork-ready.js";
import { commandCounts, startPrivateRedis } from "../test/helpers/private-redis.js";

const list = (value: string) =>
  value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const SURFACES = list(process.env.BENCH_SURFACES ?? "platform,account,gateway") as Surface[];
const MODES = list(process.env.BENCH_MODES ?? "json,sse");
const TRACES = Number(process.env.BENCH_TRACES ?? 5);
const LATENCY_MS = Number(process.env.MOCK_LATENCY_MS ?? 2);
/** The replay (`replay`): connections, requests in flight on each, and rounds (the median is reported, with the range). */
const REPLAY_ROUNDS = Number(process.env.BENCH_REPLAY_ROUNDS ?? 3);
const REPLAY_CONNECTIONS = Number(process.env.BENCH_REPLAY_CONNECTIONS ?? 4);
const REPLAY_CONCURRENCY = Number(process.env.BENCH_REPLAY_CONCURRENCY ?? 16);
const MODEL = "bench-model";
/** Targets of issue 38 for a Platform JSON chat. */
const TARGETS = { redisCpuUs: 40, roundTripsBefore: 2 };
const CLOCK_TICKS = Number(execSync("getconf CLK_TCK").toString().trim()) || 100;

type Surface = "platform" | "account" | "gateway" | "floor";
const PATHS: Record<Surface, string> = {
  platform: "/api/v1/chat/completions",
  account: "/account/v1/chat/completions",
  gateway: "/gateway/v1/chat/completions",
  floor: "/v1/chat/completions",
};

function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

const body = (stream: boolean) =>
  JSON.stringify({
    model: MODEL,
    messages: [
      { role: "system", content: "You are a helpful assistant." },
      { role: "user", content: "Say hello in five words." },
    ],
    max_tokens: 32,
    ...(stream ? { stream: true } : {}),
  });

async function load(url: string, token: string, stream: boolean, seconds: number): Promise<number> {
  let failures = 0;
  let ok = 0;
  const instance = autocannon({
    url,
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: body(stream),
    connections: CONCURRENCY,
    pipelining: 1,
    duration: seconds,
    timeout: 10,
  });
  instance.on("response", (_client: unknown, statusCode: number) => {
    if (statusCode >= 200 && statusCode < 300) ok += 1;
    else failures += 1;
  });
  const result = await instance;
  if (failures || result.errors || result.timeouts)
    throw new Error(`${url}: ${failures} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  return ok;
}

async function request(url: string, token: string, stream: boolean): Promise<void> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: body(stream),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 300)}`);
}

interface MonitorLine {
  /** Epoch µs. */
  at: number;
  client: string;
  command: string;
  /** The command and its arguments as sent. */
  args: string[];
}

/** The quoted arguments of a MONITOR line (`"evalsha" "abc" "2" …`, with C-style escapes). */
function monitorArgs(text: string): string[] {
  const args: string[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] !== '"') {
      i += 1;
      continue;
    }
    let arg = "";
    i += 1;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === "\\") {
        const next = text[i + 1]!;
        if (next === "x") {
          arg += String.fromCharCode(Number.parseInt(text.slice(i + 2, i + 4), 16));
          i += 4;
          continue;
        }
        arg += ({ n: "\n", r: "\r", t: "\t", a: "\x07", b: "\b" } as Record<string, string>)[next] ?? next;
        i += 2;
        continue;
      }
      arg += text[i];
      i += 1;
    }
    args.push(arg);
    i += 1;
  }
  return args;
}

/**
 * A MONITOR connection collecting what the gateway's connections send: a plain socket (ioredis
 * in monitor mode trips over replies that arrive as it disconnects). Each line reads
 * `+<seconds.micros> [<db> <client address>|lua] "<command>" …`.
 */
async function monitor(url: string): Promise<{ lines: MonitorLine[]; close(): void }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await once(socket, "connect");
  const lines: MonitorLine[] = [];
  let buffer = "";
  let ready: () => void;
  const started = new Promise<void>((resolve) => (ready = resolve));
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    buffer += chunk;
    let end: number;
    while ((end = buffer.indexOf("\r\n")) !== -1) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (line === "+OK") ready();
      const match = /^\+(\d+\.\d+) \[\d+ ([^\]]+)\] (.*)$/.exec(line);
      if (!match) continue;
      const args = monitorArgs(match[3]!);
      lines.push({ at: Math.round(Number(match[1]) * 1_000_000), client: match[2]!, command: String(args[0]).toLowerCase(), args });
    }
  });
  socket.write("MONITOR\r\n");
  await started;
  return { lines, close: () => socket.destroy() };
}

/** Round trips in `lines` (one connection's MULTI … EXEC counts once; commands inside scripts are not round trips). */
function roundTrips(lines: MonitorLine[]): number {
  let trips = 0;
  const inMulti = new Set<string>();
  for (const line of lines) {
    if (line.client === "lua") continue;
    if (line.command === "multi") {
      inMulti.add(line.client);
      trips += 1;
    } else if (line.command === "exec") inMulti.delete(line.client);
    else if (!inMulti.has(line.client)) trips += 1;
  }
  return trips;
}

/**
 * Replays one request's commands (as MONITOR saw them) from REPLAY_CONNECTIONS connections,
 * REPLAY_CONCURRENCY requests in flight on each, for `seconds`: Redis busy the way many
 * gateway instances would keep it, so its CPU per request is what its commands cost it, not
 * the wake-ups of a Redis mostly idle. Scripts are already in the server's cache (the gateway
 * loaded them). Returns Redis CPU µs per replayed request and the requests per second.
 */
async function replay(url: string, pid: number, commands: string[][], seconds: number): Promise<{ cpuUs: number; rps: number }> {
  const clients = Array.from({ length: REPLAY_CONNECTIONS }, () => new Redis(url));
  await Promise.all(clients.map((client) => client.ping()));
  const before = cpuMicros(pid);
  const deadline = Date.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    clients.flatMap((client) =>
      Array.from({ length: REPLAY_CONCURRENCY }, async () => {
        while (Date.now() < deadline) {
          for (const [command, ...args] of commands) await client.call(command!, ...args);
          done += 1;
        }
      }),
    ),
  );
  const cpuUs = (cpuMicros(pid) - before) / done;
  for (const client of clients) client.disconnect();
  return { cpuUs, rps: done / seconds };
}

/**
 * The least `trips` round trips per request cost Redis at `rate` requests per second (spread
 * over CONCURRENCY clients, as the gateway's requests are): each request sends `trips` PINGs in
 * turn. What remains of a row's Redis CPU above this is the work of its commands; this part is
 * the wake-ups and socket reads and writes of a Redis that is mostly idle between requests.
 */
async function pacedPings(url: string, pid: number, rate: number, trips: number, seconds: number): Promise<number> {
  const client = new Redis(url);
  await client.ping();
  const before = cpuMicros(pid);
  const started = Date.now();
  let sent = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (;;) {
        const due = started + (sent / rate) * 1000;
        if (due > started + seconds * 1000) return;
        sent += 1;
        const wait = due - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        for (let i = 0; i < trips; i++) await client.ping();
      }
    }),
  );
  const cpuUs = (cpuMicros(pid) - before) / sent;
  client.disconnect();
  return cpuUs;
}

interface Row {
  surface: Surface;
  stream: boolean;
  rps: number;
  gatewayCpuUs: number;
  redisCpuUs?: number;
  /** What the same round trips alone (PINGs at the same rate) cost Redis (`pacedPings`). */
  pingFloorUs?: number;
  /** Redis CPU per request with Redis kept busy (`replay`), and how many requests per second one Redis then serves. */
  replayCpuUs?: number;
  /** The lowest and highest of the replay's rounds. */
  replayRange?: [number, number];
  replayRps?: number;
  commands?: number;
  before?: number;
  total?: number;
  trace?: string;
}

async function main() {
  const started = Date.now();
  const redis = await startPrivateRedis();
  const mock = await forkReady("bench/internal/mock-upstream.ts", { MOCK_LATENCY_MS: String(LATENCY_MS) });
  const mockOrigin = mock.words[0]!;
  const rows: Row[] = [];
  try {
    // The floor: a bare Node relay, what Node's HTTP server and client alone cost here.
    for (const stream of MODES.map((mode) => mode === "sse")) {
      const floor = await forkReady("bench/internal/floor-proxy.ts", { UPSTREAM: mockOrigin, KEY: "floor-key" });
      try {
        const url = `${floor.words[0]}${PATHS.floor}`;
        await load(url, "floor-key", stream, WARMUP_SECONDS);
        const before = cpuMicros(floor.child.pid!);
        const ok = await load(url, "floor-key", stream, SECONDS);
        rows.push({ surface: "floor", stream, rps: ok / SECONDS, gatewayCpuUs: (cpuMicros(floor.child.pid!) - before) / ok });
      } finally {
        await stop(floor.child);
      }
    }
    const gateway = await forkReady("bench/internal/chat-server.ts", {
      STORAGE: "redis",
      REDIS_URL: redis.url,
      REDIS_PREFIX: "gw",
      // Nothing in the background: every command MONITOR sees is a request's.
      WEBHOOKS_POLL_MS: "0",
      QUOTA_STREAMS_PER_KEY: "100000",
      QUOTA_STREAMS_PER_USER: "100000",
      QUOTA_STREAMS_PER_TENANT: "100000",
      MODELS_JSON: JSON.stringify({
        models: { [MODEL]: { provider: "openai-compatible", baseURL: `${mockOrigin}/v1`, ownedBy: "bench" } },
      }),
    });
    const [origin, platformKey, gatewayKey, accountKey] = gateway.words as [string, string, string, string];
    const tokens: Record<Surface, string> = { platform: platformKey, gateway: gatewayKey, account: accountKey, floor: "" };
    const pid = gateway.child.pid!;
    try {
      for (const surface of SURFACES)
        for (const stream of MODES.map((mode) => mode === "sse")) {
          const url = `${origin}${PATHS[surface]}`;
          await load(url, tokens[surface], stream, WARMUP_SECONDS);
          // Round trips, one request at a time.
          const traces: { before: number; total: number; commands: string; sent: string[][] }[] = [];
          for (let i = 0; i < TRACES; i++) {
            await fetch(`${mockOrigin}/arrivals`).then((res) => res.json());
            const watch = await monitor(redis.url);
            await request(url, tokens[surface], stream);
            // The settlement follows the answer's last byte (docs/crash-consistency.md): let it land.
            await new Promise((resolve) => setTimeout(resolve, 100));
            watch.close();
            const [arrival] = (await fetch(`${mockOrigin}/arrivals`).then((res) => res.json())) as number[];
            const sent = watch.lines.filter((line) => line.command !== "monitor");
            traces.push({
              before: roundTrips(sent.filter((line) => line.at < arrival!)),
              total: roundTrips(sent),
              commands: sent
                .filter((line) => line.client !== "lua")
                .map((line) => line.command)
                .join(" "),
              sent: sent.filter((line) => line.client !== "lua").map((line) => line.args),
            });
          }
          traces.sort((a, b) => a.total - b.total);
          const median = traces[Math.floor(traces.length / 2)]!;
          // Load: commands and CPU per request.
          await redis.admin.config("RESETSTAT");
          const redisBefore = cpuMicros(redis.pid);
          const gatewayBefore = cpuMicros(pid);
          const ok = await load(url, tokens[surface], stream, SECONDS);
          const redisCpuUs = (cpuMicros(redis.pid) - redisBefore) / ok;
          const gatewayCpuUs = (cpuMicros(pid) - gatewayBefore) / ok;
          let calls = 0;
          for (const [command, count] of await commandCounts(redis.admin))
            if (command !== "info" && !command.startsWith("config")) calls += count;
          const rounds: { cpuUs: number; rps: number }[] = [];
          for (let round = 0; round < REPLAY_ROUNDS; round++) rounds.push(await replay(redis.url, redis.pid, median.sent, SECONDS));
          rounds.sort((a, b) => a.cpuUs - b.cpuUs);
          const replayed = rounds[Math.floor(rounds.length / 2)]!;
          const pingFloorUs = await pacedPings(redis.url, redis.pid, ok / SECONDS, median.total, SECONDS);
          const row: Row = {
            surface,
            stream,
            rps: ok / SECONDS,
            gatewayCpuUs,
            redisCpuUs,
            replayCpuUs: replayed.cpuUs,
            replayRange: [rounds[0]!.cpuUs, rounds.at(-1)!.cpuUs],
            pingFloorUs,
            replayRps: replayed.rps,
            commands: calls / ok,
            before: median.before,
            total: median.total,
            trace: median.commands,
          };
          rows.push(row);
          process.stderr.write(
            `${surface.padEnd(8)} ${stream ? "sse " : "json"} ${Math.round(row.rps)} req/s, Redis ${redisCpuUs.toFixed(1)} µs CPU ` +
              `(${replayed.cpuUs.toFixed(1)} µs kept busy, ${Math.round(replayed.rps)} req/s) and ` +
              `${row.commands!.toFixed(1)} commands per request, round trips ${median.before} before the upstream / ${median.total}: ${median.commands}\n`,
          );
        }
    } finally {
      await stop(gateway.child);
    }
  } finally {
    await stop(mock.child);
    await redis.stop();
  }
  report(rows, (Date.now() - started) / 1000);
}

function report(rows: Row[], seconds: number) {
  const lines: string[] = [];
  lines.push(
    `Redis per chat — ${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), Node ${process.versions.node}`,
  );
  lines.push(`Mock upstream latency ${LATENCY_MS} ms; c=${CONCURRENCY}, ${SECONDS} s per run; total ${seconds.toFixed(0)} s.`);
  lines.push("");
  lines.push(
    "| surface | mode | req/s | process CPU µs/req | Redis CPU µs/req | as many PINGs, µs/req | Redis CPU µs/req, Redis kept busy | " +
      "one Redis kept busy, req/s | Redis commands/req | round trips before upstream | round trips in all | commands sent (one request) |",
  );
  lines.push("|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const row of rows) {
    const dash = (value: number | undefined, digits = 1) => (value === undefined ? "—" : value.toFixed(digits));
    const range = row.replayRange ? ` (${row.replayRange.map((value) => value.toFixed(1)).join("–")})` : "";
    lines.push(
      `| ${row.surface} | ${row.stream ? "SSE" : "JSON"} | ${Math.round(row.rps)} | ${Math.round(row.gatewayCpuUs)} | ${dash(row.redisCpuUs)} | ` +
        `${dash(row.pingFloorUs)} | ${dash(row.replayCpuUs)}${range} | ${row.replayRps === undefined ? "—" : Math.round(row.replayRps)} | ` +
        `${dash(row.commands)} | ${row.before ?? "—"} | ${row.total ?? "—"} | ${row.trace ?? "—"} |`,
    );
  }
  lines.push("");
  const platform = rows.find((row) => row.surface === "platform" && !row.stream);
  if (platform) {
    const verdict = (ok: boolean) => (ok ? "met" : "NOT met");
    lines.push("Targets (Platform JSON chat):");
    lines.push(
      `- Redis CPU ${platform.replayCpuUs!.toFixed(1)} µs per request with Redis kept busy (${platform.redisCpuUs!.toFixed(1)} µs at this ` +
        `one gateway's ${Math.round(platform.rps)} req/s) ≤ ${TARGETS.redisCpuUs} µs — ${verdict(platform.replayCpuUs! <= TARGETS.redisCpuUs)}`,
    );
    lines.push(
      `- round trips before the upstream call ${platform.before} ≤ ${TARGETS.roundTripsBefore} — ${verdict(platform.before! <= TARGETS.roundTripsBefore)}`,
    );
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
