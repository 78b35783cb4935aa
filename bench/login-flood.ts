/**
 * Login-flood benchmark (issue: "hashing does not starve storage"): the latency of a
 * storage-backed read, `GET /gateway/v1/auth/keys` on fs storage, while 40 failed logins are
 * kept in flight (each scrypt N=2^17 takes ~0.5 s of one libuv pool thread), in three
 * configurations, each in a fresh server process:
 *
 *   before     PASSWORD_HASH_CONCURRENCY=0 (unbounded), UV_THREADPOOL_SIZE=4 (libuv's default)
 *   bounded    PASSWORD_HASH_CONCURRENCY=2 (the default), UV_THREADPOOL_SIZE=4
 *   bounded+8  PASSWORD_HASH_CONCURRENCY=2, UV_THREADPOOL_SIZE=8 (what `npm start` sets)
 *
 * Per configuration: the read's p50/p99 idle, then under the flood, and the logins answered
 * per second (the bound does not change how many hashes the CPU completes, only who waits).
 * Loopback only; the data directory is a temporary one, removed at the end.
 *
 *   npm run bench:login     (BENCH_FLOOD_SECONDS, BENCH_FLOOD_CONCURRENCY override the sizes)
 */
import type { ChildProcess } from "node:child_process";
import { forkReady } from "./internal/fork-ready.js";
import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";

const FLOOD_SECONDS = Number(process.env.BENCH_FLOOD_SECONDS ?? 20);
const FLOOD_CONCURRENCY = Number(process.env.BENCH_FLOOD_CONCURRENCY ?? 40);
const IDLE_READS = 50;

interface Setup {
  name: string;
  hashConcurrency: string;
  poolSize: string;
}

const SETUPS: Setup[] = [
  { name: "before", hashConcurrency: "0", poolSize: "4" },
  { name: "bounded", hashConcurrency: "2", poolSize: "4" },
  { name: "bounded+8", hashConcurrency: "2", poolSize: "8" },
];

async function startServer(setup: Setup, dataDir: string): Promise<{ child: ChildProcess; origin: string }> {
  const { child, words } = await forkReady("bench/internal/server.ts", {
    // libuv reads this when its pool first starts: it must be in the environment before the process does.
    UV_THREADPOOL_SIZE: setup.poolSize,
    PASSWORD_HASH_CONCURRENCY: setup.hashConcurrency,
    STORAGE: "fs",
    DATA_DIR: dataDir,
    LOG_LEVEL: "silent",
    LOGIN_MAX_FAILURES: "1000",
    GATEWAY_JWT_SECRET: "bench-secret-that-is-at-least-32-characters",
  });
  return { child, origin: words[0]! };
}

async function json(
  origin: string,
  path: string,
  init: { method?: string; token?: string; body?: unknown } = {},
): Promise<{ status: number; body: any }> {
  const res = await fetch(origin + path, {
    method: init.method ?? "GET",
    headers: { "content-type": "application/json", ...(init.token ? { authorization: `Bearer ${init.token}` } : {}) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function summary(samples: number[]): { n: number; p50: number; p99: number; max: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { n: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1)! };
}

async function timedRead(origin: string, token: string): Promise<number> {
  const started = performance.now();
  const res = await json(origin, "/gateway/v1/auth/keys", { token });
  if (res.status !== 200) throw new Error(`GET /auth/keys answered ${res.status}`);
  return performance.now() - started;
}

async function run(setup: Setup) {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-login-"));
  const { child, origin } = await startServer(setup, dataDir);
  try {
    const email = `bench-${Date.now()}@example.com`;
    const registered = await json(origin, "/gateway/v1/auth/register", {
      method: "POST",
      body: { email, password: "Correct-Horse-9", fullName: "Bench" },
    });
    if (registered.status !== 201) throw new Error(`register answered ${registered.status}`);
    const token = registered.body.token as string;
    for (let i = 0; i < 5; i++) await json(origin, "/gateway/v1/auth/keys", { method: "POST", token, body: { name: `key-${i}` } });

    const idle: number[] = [];
    for (let i = 0; i < IDLE_READS; i++) idle.push(await timedRead(origin, token));

    // The flood: FLOOD_CONCURRENCY failed logins always in flight (unknown emails: same work as a wrong password).
    let stop = false;
    let logins = 0;
    const loginLatency: number[] = [];
    const attacker = async (lane: number) => {
      for (let i = 0; !stop; i++) {
        const started = performance.now();
        const res = await json(origin, "/gateway/v1/auth/login", {
          method: "POST",
          body: { email: `nobody-${lane}-${i}@example.com`, password: "Wrong-Horse-99" },
        });
        if (res.status !== 401) throw new Error(`failed login answered ${res.status}`);
        if (!stop) {
          logins += 1;
          loginLatency.push(performance.now() - started);
        }
      }
    };
    const floodStarted = performance.now();
    const lanes = Array.from({ length: FLOOD_CONCURRENCY }, (_, lane) => attacker(lane));
    // Let the queue fill before measuring the read.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const flooded: number[] = [];
    const until = floodStarted + FLOOD_SECONDS * 1000;
    while (performance.now() < until) flooded.push(await timedRead(origin, token));
    stop = true;
    const elapsed = (performance.now() - floodStarted) / 1000;
    await Promise.all(lanes);
    return { idle: summary(idle), flooded: summary(flooded), loginsPerSecond: logins / elapsed, login: summary(loginLatency) };
  } finally {
    child.kill("SIGTERM");
    await new Promise((resolve) => child.once("exit", resolve));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const ms = (value: number) => `${value.toFixed(value < 10 ? 1 : 0)} ms`;
console.log(
  `Login flood: ${FLOOD_CONCURRENCY} failed logins in flight for ${FLOOD_SECONDS} s; read = GET /gateway/v1/auth/keys on fs storage`,
);
console.log(
  `machine: ${availableParallelism()} cores, load average ${loadavg()
    .map((n) => n.toFixed(2))
    .join(" ")}, node ${process.version}\n`,
);
console.log("setup       hashes  pool  read idle p50/p99      read under flood p50/p99 (max, n)     logins/s  login p50");
for (const setup of SETUPS) {
  const result = await run(setup);
  console.log(
    [
      setup.name.padEnd(10),
      (setup.hashConcurrency === "0" ? "∞" : setup.hashConcurrency).padStart(6),
      setup.poolSize.padStart(5),
      `  ${ms(result.idle.p50)} / ${ms(result.idle.p99)}`.padEnd(22),
      `  ${ms(result.flooded.p50)} / ${ms(result.flooded.p99)} (${ms(result.flooded.max)}, ${result.flooded.n})`.padEnd(40),
      result.loginsPerSecond.toFixed(1).padStart(8),
      ms(result.login.p50).padStart(10),
    ].join(" "),
  );
}
