import { loadConfig } from "../../rpc/config.js";
import { startServer, type RunningServer, type StartOptions } from "../../facade/server.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "./redis.js";

export const TEST_JWT_SECRET = "test-secret-that-is-at-least-32-characters-long";
/** DATA_ENCRYPTION_SECRET of test servers (required with Redis); pass `""` to have fs generate one. */
export const TEST_DATA_SECRET = "test-data-encryption-secret-of-32-characters-or-more";

export interface TestServer extends RunningServer {
  /** Every log line the server wrote, parsed. */
  logs(): Record<string, unknown>[];
  /** Raw log lines, for checks that a secret never appears. */
  rawLogs: string[];
  url(path: string): string;
  /** JSON request helper: returns status, headers and the parsed body. */
  request(path: string, init?: RequestInit & { json?: unknown }): Promise<{ status: number; headers: Headers; body: any }>;
  /** Errors the server logged (unexpected exceptions); a test fails when there are any it did not expect. */
  loggedErrors(): Record<string, unknown>[];
  /** Says that error lines matching `match` are expected, so `close()` does not fail on them. */
  allowLoggedErrors(match: (line: Record<string, unknown>) => boolean): void;
}

/**
 * The real server on 127.0.0.1:0 with memory storage unless `env` says otherwise. Close it in
 * afterAll; `close()` fails the test if the server logged an error it was not told to expect
 * (`allowLoggedErrors`).
 */
export async function startTestServer(
  env: Record<string, string> = {},
  options: Pick<StartOptions, "resolveHost"> = {},
): Promise<TestServer> {
  const rawLogs: string[] = [];
  const config = loadConfig({
    STORAGE: "memory",
    REDIS_URL: TEST_REDIS_URL,
    LOG_LEVEL: "info",
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    // vitest.config.ts: cheaper password hashes for the suite.
    PASSWORD_SCRYPT_LOG2N: process.env.PASSWORD_SCRYPT_LOG2N ?? "17",
    ...env,
    PORT: env.PORT ?? "0",
    HOST: "127.0.0.1",
  });
  const server = await startServer(config, { ...options, logSink: (line) => rawLogs.push(line) });
  const logs = () => rawLogs.map((line) => JSON.parse(line) as Record<string, unknown>);
  const url = (path: string) => server.origin + path;
  const allowed: ((line: Record<string, unknown>) => boolean)[] = [];
  return {
    ...server,
    logs,
    rawLogs,
    url,
    async request(path, init = {}) {
      const { json, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (json !== undefined && !headers.has("content-type")) headers.set("content-type", "application/json");
      const response = await fetch(url(path), { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body });
      const text = await response.text();
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: keep the text
      }
      return { status: response.status, headers: response.headers, body };
    },
    loggedErrors: () => logs().filter((line) => line.level === "error"),
    allowLoggedErrors(match) {
      allowed.push(match);
    },
    async close() {
      await server.close();
      const unexpected = logs().filter((line) => line.level === "error" && !allowed.some((match) => match(line)));
      if (unexpected.length)
        throw new Error(`The server logged unexpected errors:\n${unexpected.map((line) => JSON.stringify(line)).join("\n")}`);
    },
  };
}

let counter = 0;
/** A unique, valid registration body. */
export function newUserBody(overrides: Partial<{ email: string; password: string; fullName: string }> = {}) {
  counter += 1;
  return {
    email: `user${Date.now().toString(36)}${counter}@example.com`,
    password: "Correct-Horse-9",
    fullName: "Test User",
    ...overrides,
  };
}

/** Registers a user through the Gateway API and returns its session token. */
export async function registerUser(server: TestServer, overrides: Parameters<typeof newUserBody>[0] = {}) {
  const body = newUserBody(overrides);
  const res = await server.request("/gateway/v1/auth/register", { method: "POST", json: body });
  if (res.status !== 201) throw new Error(`register failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { ...body, token: res.body.token as string, user: res.body.user as { id: string; workspaceId: string; tenantId: string } };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/**
 * The servers a money or limit test runs on one storage driver: one on memory, one on fs in a
 * fresh DATA_DIR, two instances sharing a fresh Redis prefix on redis. `close()` checks that none
 * logged an error, stops them and removes what they stored.
 */
export async function startOnDriver(
  driver: "memory" | "fs" | "redis",
  env: Record<string, string>,
): Promise<{ servers: TestServer[]; close(): Promise<void> }> {
  const own: Record<string, string> = { ...env, STORAGE: driver };
  let dir: string | undefined;
  let prefix: string | undefined;
  if (driver === "fs") own.DATA_DIR = dir = await mkdtemp(join(tmpdir(), "gw-driver-"));
  if (driver === "redis") own.REDIS_PREFIX = prefix = uniqueRedisPrefix();
  const servers = await Promise.all((driver === "redis" ? [own, own] : [own]).map((each) => startTestServer(each)));
  return {
    servers,
    close: async () => {
      for (const server of servers) {
        expect(server.loggedErrors()).toEqual([]);
        await server.close();
      }
      if (dir) await rm(dir, { recursive: true, force: true });
      if (prefix) await dropRedisPrefix(prefix);
    },
  };
}
