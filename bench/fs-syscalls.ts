/**
 * File system calls per chat request on STORAGE=fs (docs/storage.md). Starts the mock upstream
 * and the benchmark gateway (a Platform key with rpm/tpm limits and credits: key lookup,
 * limits, credit hold and settlement on every request) in a temporary DATA_DIR, attaches
 * `strace -f -c` to every thread of the gateway once it is ready, sends BENCH_REQUESTS JSON
 * chat requests (default 2000) at concurrency BENCH_CONCURRENCY (default 16), detaches and
 * prints the calls per request, after a pass without strace that reads the gateway's CPU time
 * per request from /proc. BENCH_STORAGE=memory gives the baseline. Needs strace (Linux) and permission to attach (ptrace_scope 0
 * or root).
 *
 *   npx tsx bench/fs-syscalls.ts
 */
import { spawn as spawnChild, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { forkReady } from "./internal/fork-ready.js";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 2000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
/** fs by default; memory for a baseline without storage files. */
const STORAGE = process.env.BENCH_STORAGE ?? "fs";
const CALLS = [
  "openat",
  "close",
  "read",
  "write",
  "pwrite64",
  "writev",
  "fsync",
  "fdatasync",
  "rename",
  "mkdir",
  "statx",
  "newfstatat",
  "fstat",
  "unlink",
  "rmdir",
  "utimensat",
];

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  await exited;
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-fs-syscalls-"));
  const mock = await forkReady("bench/internal/mock-upstream.ts", { MOCK_LATENCY_MS: "1" });
  const gateway = await forkReady("bench/internal/chat-server.ts", {
    STORAGE,
    DATA_DIR: dataDir,
    MODELS_JSON: JSON.stringify({
      models: { "bench-model": { provider: "openai-compatible", baseURL: `${mock.words[0]}/v1`, ownedBy: "bench" } },
    }),
  });
  const [origin, key] = gateway.words as [string, string];
  const url = `${origin}/api/v1/chat/completions`;
  const body = JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: "Say hello." }], max_tokens: 16 });
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  try {
    // Warm up: first reads, JIT, connections.
    await autocannon({ url, method: "POST", headers, body, connections: CONCURRENCY, amount: 200 } as Parameters<typeof autocannon>[0]);
    const pid = gateway.child.pid!;
    // The gateway's CPU time per request, from /proc (utime + stime, in clock ticks of 10 ms),
    // without strace attached: a figure that holds on a busy machine.
    const cpuTicks = () =>
      readFileSync(`/proc/${pid}/stat`, "utf8")
        .split(") ")[1]!
        .split(" ")
        .slice(11, 13)
        .reduce((sum, ticks) => sum + Number(ticks), 0);
    const ticksBefore = cpuTicks();
    const timed = await autocannon({ url, method: "POST", headers, body, connections: CONCURRENCY, amount: REQUESTS } as Parameters<
      typeof autocannon
    >[0]);
    const cpuPerRequestUs = ((cpuTicks() - ticksBefore) * 10_000) / REQUESTS;
    const threads = readdirSync(`/proc/${pid}/task`).flatMap((tid) => ["-p", tid]);
    const out = join(dataDir, "..", `strace-${pid}.txt`);
    const strace = spawnChild("strace", ["-f", "-c", "-o", out, ...threads], { stdio: ["ignore", "ignore", "pipe"] });
    let straceErr = "";
    strace.stderr!.on("data", (chunk) => (straceErr += String(chunk)));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const result = await autocannon({ url, method: "POST", headers, body, connections: CONCURRENCY, amount: REQUESTS } as Parameters<
      typeof autocannon
    >[0]);
    const exited = once(strace, "exit");
    strace.kill("SIGINT");
    await exited;
    const summary = readFileSync(out, "utf8");
    rmSync(out, { force: true });
    if (result.non2xx || result.errors || result.timeouts)
      throw new Error(`${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
    const counts = new Map<string, number>();
    for (const line of summary.split("\n")) {
      const fields = line.trim().split(/\s+/);
      const name = fields.at(-1)!;
      if (fields.length >= 5 && CALLS.includes(name)) counts.set(name, Number(fields[3]));
    }
    if (counts.size === 0) throw new Error(`strace reported nothing: ${straceErr}${summary}`);
    process.stdout.write(
      `STORAGE=${STORAGE}, ${REQUESTS} chat requests at c=${CONCURRENCY}: ${Math.round(timed.requests.average)} req/s, gateway CPU ${Math.round(cpuPerRequestUs)} µs per request (without strace)\n\n`,
    );
    process.stdout.write(
      `System calls per chat request (strace -f -c; read/write include the HTTP sockets):\n\n| call | per request |\n|---|---|\n`,
    );
    for (const name of CALLS) if (counts.has(name)) process.stdout.write(`| ${name} | ${(counts.get(name)! / REQUESTS).toFixed(2)} |\n`);
  } finally {
    await stop(gateway.child);
    await stop(mock.child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
