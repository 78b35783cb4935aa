import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_DATA_SECRET, TEST_JWT_SECRET } from "../helpers/server.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";
import { eventually } from "../helpers/eventually.js";

/**
 * WORKERS (docs/operating.md "Every core"): node:cluster workers on one port, as `npm start`
 * runs them (compiled, dist/scripts/start.js): refused with one line unless STORAGE=redis; with
 * Redis, every worker serves, /metrics sums them all, a worker killed with SIGKILL is replaced
 * while the others serve, and SIGTERM drains them all and frees the port.
 */
const BASE_ENV = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: "0", LOG_LEVEL: "silent" };
const prefix = uniqueRedisPrefix();

beforeAll(() => {
  const built = spawnSync(process.execPath, ["scripts/build-if-stale.mjs"], { stdio: "pipe", encoding: "utf8" });
  if (built.status !== 0) throw new Error(`build failed: ${built.stderr}${built.stdout}`);
}, 180_000);
afterAll(() => dropRedisPrefix(prefix));

function start(env: Record<string, string>): { child: ChildProcess; stderr: () => string } {
  const child = spawn(process.execPath, ["dist/scripts/start.js"], { env: { ...BASE_ENV, ...env }, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  return { child, stderr: () => stderr };
}

/** The pids of a process's children (its workers). */
function childrenOf(pid: number): number[] {
  const out = spawnSync("ps", ["-o", "pid=", "--ppid", String(pid)], { encoding: "utf8" }).stdout;
  return out
    .split("\n")
    .map((line) => Number(line.trim()))
    .filter(Boolean);
}

describe.each(["memory", "fs"])("WORKERS=2 with STORAGE=%s", (storage) => {
  it("is refused with one line naming the setting", async () => {
    const { child, stderr } = start({ STORAGE: storage, WORKERS: "2", DATA_DIR: "/tmp/gw-workers-unused" });
    const [code] = await once(child, "exit");
    expect(code).toBe(1);
    const lines = stderr().trimEnd().split("\n");
    expect(lines, stderr()).toHaveLength(1);
    expect(lines[0]).toMatch(/^Invalid configuration: WORKERS=2: .*set STORAGE=redis/);
  });
});

describe("WORKERS=2 with STORAGE=redis", () => {
  let run: ReturnType<typeof start>;
  let origin: string;
  beforeAll(async () => {
    run = start({
      STORAGE: "redis",
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: prefix,
      WORKERS: "2",
      GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
      DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    });
    origin = (await eventually(() => /gateway\s+(http:\/\/127\.0\.0\.1:\d+)\/gateway\/v1/.exec(run.stderr())?.[1], 60_000))!;
  }, 90_000);
  afterAll(() => {
    if (run.child.exitCode === null) run.child.kill("SIGKILL");
  });

  it("serves one port from two workers, and /metrics counts every worker's requests", async () => {
    expect(run.stderr()).toContain("Gateway listening (storage: redis, 2 workers)");
    expect(childrenOf(run.child.pid!)).toHaveLength(2);
    const count = async () => {
      const text = await (await fetch(`${origin}/metrics`)).text();
      return [...text.matchAll(/^gateway_http_requests_total\{[^}]*operation="gateway\.models\.list"[^}]*\} (\d+)/gm)].reduce(
        (sum, match) => sum + Number(match[1]),
        0,
      );
    };
    const before = await count();
    // New connections each: the primary hands them to the workers in turn.
    for (let i = 0; i < 20; i++)
      expect((await fetch(`${origin}/gateway/v1/models`, { headers: { connection: "close" } })).status).toBe(401);
    expect((await count()) - before).toBe(20);
  });

  it("starts another worker when one is killed, serving all along", async () => {
    const [victim] = childrenOf(run.child.pid!);
    process.kill(victim!, "SIGKILL");
    // Once the primary has seen the death, the other worker serves every connection while the
    // replacement starts. A connection handed to the dead worker in the instant before is reset
    // (Node 20) or never answered (Node 24), so each request has its own deadline.
    const ready = async () =>
      (await fetch(`${origin}/readyz`, { headers: { connection: "close" }, signal: AbortSignal.timeout(5000) })).status;
    await eventually(() => run.stderr().includes(`worker ${victim} exited (SIGKILL); starting another`), 15_000);
    for (let i = 0; i < 5; i++) expect(await ready()).toBe(200);
    await eventually(() => {
      const now = childrenOf(run.child.pid!);
      return now.length === 2 && !now.includes(victim!);
    }, 30_000);
    for (let i = 0; i < 5; i++) expect(await ready()).toBe(200);
  }, 60_000);

  it("drains every worker on SIGTERM and exits 0, freeing the port", async () => {
    const workers = childrenOf(run.child.pid!);
    run.child.kill("SIGTERM");
    const [code] = await once(run.child, "exit");
    expect(code).toBe(0);
    expect(run.stderr()).toContain("SIGTERM: draining 2 workers");
    for (const pid of workers) expect(() => readFileSync(`/proc/${pid}/stat`)).toThrow();
    await expect(fetch(`${origin}/healthz`)).rejects.toThrow();
  }, 60_000);
});
