import { spawn, spawnSync } from "node:child_process";
import { connect, createServer, type Server } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import lockfile from "proper-lockfile";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_REDIS_URL } from "../helpers/redis.js";
import { openStore, type Store } from "../../storage/store.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";

/**
 * The start path as an operator runs it: `npm start` is one process that honours SIGTERM, and
 * every bad start is one line on stderr with exit code 1. The spawns run compiled JavaScript
 * (dist/), built once here the way `npm start`'s prestart does.
 */

const BASE_ENV = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", LOG_LEVEL: "silent" };

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

beforeAll(() => {
  const built = spawnSync(process.execPath, ["scripts/build-if-stale.mjs"], { stdio: "pipe", encoding: "utf8" });
  if (built.status !== 0) throw new Error(`build failed: ${built.stderr}${built.stdout}`);
}, 180_000);

describe("npm start", () => {
  it("is one process group that SIGTERM stops, freeing the port", async () => {
    const child = spawn("npm", ["start"], {
      env: { ...BASE_ENV, PORT: "0", STORAGE: "memory" },
      detached: true,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      const origin = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start line: ${stderr}`)), 60_000);
        child.stderr.on("data", () => {
          const match = /gateway\s+(http:\/\/127\.0\.0\.1:\d+)\/gateway\/v1/.exec(stderr);
          if (match) clearTimeout(timer), resolve(match[1]!);
        });
      });
      const port = Number(new URL(origin).port);
      expect((await fetch(`${origin}/healthz`)).status).toBe(200);
      expect(await (await fetch(`${origin}/readyz`)).json()).toMatchObject({ status: "ready", storage: "memory" });

      process.kill(child.pid!, "SIGTERM");
      expect(await exited).toBe(0);
      expect(stderr).toContain("SIGTERM: draining");
      // npm and the server it ran: nothing of the group is left, and the port is free.
      for (let i = 0; i < 50 && groupAlive(child.pid!); i++) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(groupAlive(child.pid!)).toBe(false);
      expect(await portOpen(port)).toBe(false);
    } finally {
      if (groupAlive(child.pid!)) process.kill(-child.pid!, "SIGKILL");
    }
  }, 90_000);
});

describe("the build before a start", () => {
  it("waits while another build holds the checkout's build lock, then runs", async () => {
    // Taken the way the builds take it: other tests' builds may hold it for a while on a fresh clone.
    const release = await lockfile.lock(process.cwd(), {
      lockfilePath: join(process.cwd(), ".build.lock"),
      realpath: false,
      stale: 20_000,
      retries: { retries: 1_500, factor: 1, minTimeout: 200, maxTimeout: 200 },
    });
    let released = false;
    try {
      const child = spawn(process.execPath, ["scripts/build-if-stale.mjs"], { stdio: "ignore" });
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      const early = await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve("waiting"), 1_500))]);
      expect(early).toBe("waiting");
      await release();
      released = true;
      expect(await exited).toBe(0);
    } finally {
      if (!released) await release();
    }
  }, 180_000);
});

describe("a bad start is one line and exit code 1", () => {
  let busy: Server;
  let busyPort: number;
  // A DATA_DIR another process (this one) owns.
  let ownedDir: string;
  let owner: Store;
  // A Redis that evicts keys under memory pressure, as many managed ones do by default.
  let evicting: PrivateRedis;
  beforeAll(async () => {
    evicting = await startPrivateRedis(["--maxmemory-policy", "allkeys-lru"]);
    busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    busyPort = (busy.address() as { port: number }).port;
    ownedDir = await mkdtemp(join(tmpdir(), "gw-owned-"));
    owner = await openStore({ STORAGE: "fs", DATA_DIR: ownedDir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: "unused" });
  });
  afterAll(async () => {
    await evicting.stop();
    await owner.close();
    await rm(ownedDir, { recursive: true, force: true });
    await new Promise<void>((resolve) => busy.close(() => resolve()));
  });

  const SECRETS = { GATEWAY_JWT_SECRET: "x".repeat(40), DATA_ENCRYPTION_SECRET: "y".repeat(40) };
  const cases: [string, () => Record<string, string>][] = [
    ["MODELS_JSON", () => ({ MODELS_JSON: "{not json" })],
    ["MODELS_JSON", () => ({ MODELS_JSON: JSON.stringify({ models: { m: { provider: "nope" } } }) })],
    ["MODELS_FILE", () => ({ MODELS_FILE: "/nonexistent/models.json" })],
    ["REDIS_URL", () => ({ STORAGE: "redis", REDIS_URL: "redis://127.0.0.1:1", ...SECRETS })],
    // docs/storage.md "Redis in production": the password never printed, the database a number the server has.
    ["REDIS_URL", () => ({ STORAGE: "redis", REDIS_URL: "redis://:hunter2-secret@127.0.0.1:1/0", ...SECRETS })],
    ["REDIS_URL", () => ({ STORAGE: "redis", REDIS_URL: "redis://:hunter2-secret@127.0.0.1:6379/abc", ...SECRETS })],
    ["no database 99", () => ({ STORAGE: "redis", REDIS_URL: `${TEST_REDIS_URL}/99`, ...SECRETS })],
    ["maxmemory-policy allkeys-lru", () => ({ STORAGE: "redis", REDIS_URL: evicting.url, ...SECRETS })],
    ["PORT", () => ({ PORT: String(busyPort) })],
    ["GATEWAY_JWT_SECRET", () => ({ STORAGE: "redis", REDIS_URL: TEST_REDIS_URL })],
    ["HOST", () => ({ HOST: "no-such-host.invalid" })],
    ["GATEWAY_CORS_ORIGINS", () => ({ GATEWAY_CORS_ORIGINS: "app.example.com" })],
    ["PORT", () => ({ PORT: "eighty" })],
    ["DATA_DIR", () => ({ STORAGE: "fs", DATA_DIR: ownedDir })],
  ];
  it.concurrent.each(cases)("names %s", async (name, env) => {
    const child = spawn(process.execPath, ["dist/scripts/start.js"], {
      env: { ...BASE_ENV, STORAGE: "memory", PORT: "0", ...env() },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(1);
    const lines = stderr.trimEnd().split("\n");
    expect(lines, stderr).toHaveLength(1);
    expect(lines[0]).toContain(name);
    expect(stderr).not.toMatch(/\n\s+at /);
    expect(stderr).not.toContain("hunter2");
  });
});
