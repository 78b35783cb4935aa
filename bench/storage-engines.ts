/**
 * The fs storage engine against an embedded database with WAL (docs/storage.md "Why not an
 * embedded database with WAL"), on the durable work of one paid chat request on fs: its
 * settlement and usage counts, 8 records written together and durable before the answer.
 *
 *   - journal: storage/journal.ts as the server runs it (changes applied in memory, appended,
 *     one `write` + `fdatasync` per batch of whatever concurrent requests wrote meanwhile);
 *   - sqlite FULL: better-sqlite3, WAL, `synchronous=FULL` (durable at commit, as required),
 *     one transaction of 8 upserts per request;
 *   - sqlite NORMAL: the same with `synchronous=NORMAL` — not durable at commit (a power loss
 *     may drop the last transactions), shown for what durability costs it.
 *
 * Per engine and concurrency (1 and 16 requests in flight): requests/s, p50/p99 latency, and
 * this process's CPU time per request (process.cpuUsage, every thread). better-sqlite3 is a
 * native module not among the project's dependencies; install it for this run only:
 *
 *   npm install --no-save better-sqlite3 && npx tsx bench/storage-engines.ts
 *
 * Environment: BENCH_REQUESTS (per run, default 5000).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Journal } from "../storage/journal.js";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5000);
const RECORDS_PER_REQUEST = 8;

interface Engine {
  name: string;
  /** One request's durable writes; resolves once they are durable. */
  write(request: number): Promise<void>;
  close(): Promise<void>;
}

const value = (request: number, record: number) => JSON.stringify({ v: String(request * 10 + record), exp: 1_900_000_000_000 });
const key = (record: number) => `atomic:ledger:account-${record}`;

async function journalEngine(dir: string): Promise<Engine> {
  const journal = await Journal.open(join(dir, ".store"), {});
  return {
    name: "journal (fdatasync per batch)",
    async write(request) {
      const writes: Promise<void>[] = [];
      for (let record = 0; record < RECORDS_PER_REQUEST; record++) writes.push(journal.set(key(record), value(request, record)));
      await Promise.all(writes);
    },
    close: () => journal.close(),
  };
}

async function sqliteEngine(dir: string, synchronous: "FULL" | "NORMAL"): Promise<Engine> {
  const { default: Database } = (await import("better-sqlite3" as string)) as { default: new (path: string) => SqliteDatabase };
  const db = new Database(join(dir, `store-${synchronous}.db`));
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${synchronous}`);
  db.exec("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID");
  const upsert = db.prepare("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  const transaction = db.transaction((request: number) => {
    for (let record = 0; record < RECORDS_PER_REQUEST; record++) upsert.run(key(record), value(request, record));
  });
  return {
    name: `sqlite WAL synchronous=${synchronous}${synchronous === "NORMAL" ? " (not durable at commit)" : ""}`,
    // Synchronous: the commit (and its fsync) runs on the event loop, as better-sqlite3 does.
    async write(request) {
      transaction(request);
    },
    async close() {
      db.close();
    },
  };
}

interface SqliteDatabase {
  pragma(text: string): unknown;
  exec(sql: string): void;
  prepare(sql: string): { run(...args: unknown[]): unknown };
  transaction<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void;
  close(): void;
}

async function run(engine: Engine, concurrency: number) {
  const latencies: number[] = [];
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < REQUESTS) {
        const request = next++;
        const t0 = performance.now();
        await engine.write(request);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  latencies.sort((a, b) => a - b);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!;
  return {
    engine: engine.name,
    concurrency,
    requestsPerSecond: Math.round(REQUESTS / seconds),
    p50ms: +at(50).toFixed(3),
    p99ms: +at(99).toFixed(3),
    cpuUsPerRequest: Math.round((cpu.user + cpu.system) / REQUESTS),
  };
}

async function main() {
  try {
    await import("better-sqlite3" as string);
  } catch {
    process.stderr.write("better-sqlite3 is not installed: npm install --no-save better-sqlite3\n");
    process.exitCode = 1;
    return;
  }
  const rows = [];
  for (const make of [
    (dir: string) => journalEngine(dir),
    (dir: string) => sqliteEngine(dir, "FULL"),
    (dir: string) => sqliteEngine(dir, "NORMAL"),
  ]) {
    for (const concurrency of [1, 16]) {
      const dir = mkdtempSync(join(tmpdir(), "bench-engines-"));
      const engine = await make(dir);
      try {
        await run(engine, concurrency); // warm-up (and the table's first rows)
        rows.push(await run(engine, concurrency));
      } finally {
        await engine.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  const lines = ["| engine | in flight | requests/s | p50 ms | p99 ms | CPU µs/request |", "|---|---|---|---|---|---|"];
  for (const row of rows)
    lines.push(`| ${row.engine} | ${row.concurrency} | ${row.requestsPerSecond} | ${row.p50ms} | ${row.p99ms} | ${row.cpuUsPerRequest} |`);
  process.stdout.write(
    `Storage engines — ${RECORDS_PER_REQUEST} records per request, ${REQUESTS} requests per run, ${new Date().toISOString().slice(0, 10)}\n\n${lines.join("\n")}\n`,
  );
}

await main();
