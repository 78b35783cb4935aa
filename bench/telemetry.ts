/**
 * Telemetry benchmark (issue 12 "Bad input and scale"), on Redis, against a server in its own
 * process:
 *
 *   ingest    POST /gateway/v1/telemetry/events in batches of 100 events from BENCH_CONCURRENCY
 *             clients for BENCH_INGEST_SECONDS: accepted events per second, batch latency.
 *   seed      BENCH_EVENTS events (default 1,000,000) spread over the last 24 hours, written
 *             straight through the telemetry store (same code path minus HTTP) to save time;
 *             stops after BENCH_SEED_SECONDS and reports how many it stored.
 *   summary   GET /telemetry/summary over those 24 hours, grouped by name, component, version
 *             and day with `metric=durationMs`: p50/p95 latency of BENCH_SUMMARY_RUNS calls
 *             each; and one page of GET /telemetry/events.
 *
 *   npm run bench:telemetry     (needs Redis at REDIS_URL, default redis://127.0.0.1:6379)
 *
 * Everything goes under a fresh REDIS_PREFIX, deleted at the end.
 */
import type { ChildProcess } from "node:child_process";
import { forkReady } from "./internal/fork-ready.js";
import { randomUUID } from "node:crypto";
import { availableParallelism, loadavg } from "node:os";
import { Redis } from "ioredis";
import { RedisTelemetry } from "../storage/repos/telemetry-redis.js";
import type { TelemetryEvent } from "../storage/repos/telemetry-model.js";

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const INGEST_SECONDS = Number(process.env.BENCH_INGEST_SECONDS ?? 10);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const SEED_SECONDS = Number(process.env.BENCH_SEED_SECONDS ?? 180);
const SUMMARY_RUNS = Number(process.env.BENCH_SUMMARY_RUNS ?? 20);
const PREFIX = `bench-tm-${randomUUID().slice(0, 8)}`;

const NAMES = Array.from({ length: 20 }, (_, i) => `app.event_${i}`);
const COMPONENTS = ["desktop", "cli", "agent", "web", "mobile"];
const VERSIONS = Array.from({ length: 10 }, (_, i) => `1.${i}.0`);

async function startServer(): Promise<{ child: ChildProcess; origin: string }> {
  const { child, words } = await forkReady(
    "bench/internal/server.ts",
    {
      STORAGE: "redis",
      REDIS_URL,
      REDIS_PREFIX: PREFIX,
      LOG_LEVEL: "silent",
      TELEMETRY_INGEST_PER_MINUTE: "100000000",
      // One user ingests as fast as it can: neither the credential's nor the tenant's Gateway budget may stop it.
      GATEWAY_API_RATE_LIMIT_RPM: "1000000",
      GATEWAY_TENANT_RATE_LIMIT_RPM: "1000000",
      GATEWAY_JWT_SECRET: "bench-secret-that-is-at-least-32-characters",
      DATA_ENCRYPTION_SECRET: "bench-data-secret-that-is-at-least-32-characters",
    },
    // BENCH_SERVER_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", profiles the server.
    process.env.BENCH_SERVER_NODE_ARGS?.split(" ").filter(Boolean) ?? [],
  );
  return { child, origin: words[0]! };
}

function event(i: number, at: number): Omit<TelemetryEvent, "id" | "receivedAt"> {
  return {
    name: NAMES[i % NAMES.length]!,
    timestamp: new Date(at).toISOString(),
    component: COMPONENTS[i % COMPONENTS.length]!,
    version: VERSIONS[(i >> 3) % VERSIONS.length]!,
    clientId: `client-${i % 10_000}`,
    attributes: { durationMs: Math.round(Math.random() * 2000), ok: i % 17 !== 0, screen: "main" },
  };
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
const ms = (n: number) => `${n.toFixed(1)} ms`;

async function main() {
  console.log(
    `telemetry benchmark: ${availableParallelism()} cores, load ${loadavg()
      .map((n) => n.toFixed(2))
      .join(" ")}, Redis ${REDIS_URL}, prefix ${PREFIX}`,
  );
  const { child, origin } = await startServer();
  // Node's fetch keeps connections alive; the client's own cost shares these cores with the server.
  const call = async (method: "GET" | "POST", path: string, token?: string, body?: unknown) => {
    const res = await fetch(origin + path, {
      method,
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const redis = new Redis(REDIS_URL);
  try {
    const registered = await call("POST", "/gateway/v1/auth/register", undefined, {
      email: `bench-${randomUUID()}@example.com`,
      password: "Correct-Horse-9",
      fullName: "Bench",
    });
    const token = registered.body.token as string;
    const tenantId = registered.body.user.tenantId as string;

    // Ingest over HTTP.
    const latencies: number[] = [];
    let accepted = 0;
    let sent = 0;
    const deadline = performance.now() + INGEST_SECONDS * 1000;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, worker) => {
        while (performance.now() < deadline) {
          const batch = Array.from({ length: 100 }, (_, i) => event(sent + worker * 100 + i, Date.now() - 1000));
          sent += 100;
          const t0 = performance.now();
          const res = await call("POST", "/gateway/v1/telemetry/events", token, { events: batch });
          latencies.push(performance.now() - t0);
          if (res.status !== 202) throw new Error(`ingest answered ${res.status}: ${JSON.stringify(res.body).slice(0, 200)}`);
          accepted += res.body.accepted as number;
        }
      }),
    );
    const elapsed = (performance.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    console.log(`\ningest over HTTP (batches of 100, ${CONCURRENCY} concurrent, ${elapsed.toFixed(1)} s)`);
    console.log(
      `  ${Math.round(accepted / elapsed).toLocaleString("en-US")} events/s accepted (${accepted.toLocaleString("en-US")} events)`,
    );
    console.log(`  batch latency p50 ${ms(pct(latencies, 50))}, p95 ${ms(pct(latencies, 95))}`);

    // Seed straight through the store.
    const store = new RedisTelemetry(redis, PREFIX, 30);
    const seedStart = performance.now();
    const seedDeadline = seedStart + SEED_SECONDS * 1000;
    let seeded = 0;
    const span = 24 * 3_600_000 - 120_000;
    const now = Date.now();
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (seeded < EVENTS && performance.now() < seedDeadline) {
          const base = seeded;
          seeded += 500;
          const batch = Array.from({ length: 500 }, (_, i) => {
            const n = base + i;
            return { ...event(n, now - 60_000 - ((n * 7919) % span)), id: `tev_seed${n}`, receivedAt: new Date(now).toISOString() };
          });
          await store.ingest(tenantId, batch);
        }
      }),
    );
    const seedSeconds = (performance.now() - seedStart) / 1000;
    const stored = (await redis.zcard(`${PREFIX}:tm:${tenantId}:ev`)) as number;
    console.log(
      `\nseed through the store: ${stored.toLocaleString("en-US")} events stored in ${seedSeconds.toFixed(1)} s ` +
        `(${Math.round((stored - accepted) / seedSeconds).toLocaleString("en-US")} events/s, batches of 500)`,
    );
    const memory = (await redis.info("memory")).match(/used_memory_human:(\S+)/)?.[1];
    console.log(`  Redis used_memory ${memory}`);

    // Summaries over the last 24 hours.
    console.log(`\nsummary over 24 hours of ${stored.toLocaleString("en-US")} events (${SUMMARY_RUNS} calls each)`);
    for (const query of [
      "groupBy=name",
      "groupBy=day",
      "groupBy=name&metric=durationMs",
      "groupBy=component&metric=durationMs",
      "groupBy=version&metric=durationMs",
      "groupBy=day&metric=durationMs",
    ]) {
      const times: number[] = [];
      let total = 0;
      for (let i = 0; i < SUMMARY_RUNS; i += 1) {
        const t0 = performance.now();
        const res = await call("GET", `/gateway/v1/telemetry/summary?${query}`, token);
        times.push(performance.now() - t0);
        if (res.status !== 200) throw new Error(`summary answered ${res.status}`);
        total = res.body.total.count;
      }
      times.sort((a, b) => a - b);
      console.log(
        `  ${query.padEnd(36)} p50 ${ms(pct(times, 50))}, p95 ${ms(pct(times, 95))}  (total.count ${total.toLocaleString("en-US")})`,
      );
    }
    const listTimes: number[] = [];
    for (let i = 0; i < SUMMARY_RUNS; i += 1) {
      const t0 = performance.now();
      await call("GET", "/gateway/v1/telemetry/events?limit=100", token);
      listTimes.push(performance.now() - t0);
    }
    listTimes.sort((a, b) => a - b);
    console.log(`  GET /telemetry/events?limit=100   p50 ${ms(pct(listTimes, 50))}, p95 ${ms(pct(listTimes, 95))}`);
  } finally {
    child.kill("SIGTERM");
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${PREFIX}:*`, "COUNT", 1000);
      cursor = next;
      if (keys.length) await redis.unlink(...keys);
    } while (cursor !== "0");
    redis.disconnect();
  }
}

await main();
