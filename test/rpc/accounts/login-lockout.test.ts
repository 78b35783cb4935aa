import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * docs/security.md "Sign-in throttling". Before, five wrong passwords from anywhere locked the
 * real owner out (429 even with the right password) for the whole window. Requests come from
 * different loopback source addresses (127.0.0.2, .3, …) with node:http's `localAddress`.
 */
const SLOW_MS = 400;
let server: TestServer;

beforeAll(async () => {
  // (Each password check is a real scrypt of about half a second, two at a time.)
  server = await startTestServer({ LOGIN_MAX_FAILURES: "3", LOGIN_MAX_FAILURES_PER_ADDRESS: "4", LOGIN_SLOW_MS: String(SLOW_MS) });
});
afterAll(async () => {
  await server?.close();
});

function login(from: string, email: string, password: string, path = "/gateway/v1/auth/login"): Promise<{ status: number; retryAfter?: string; ms: number }> {
  const { port } = new URL(server.origin);
  const body = JSON.stringify({ email, password });
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, method: "POST", localAddress: from, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode!, retryAfter: res.headers["retry-after"] as string | undefined, ms: performance.now() - started }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("sign-in throttling", () => {
  it("wrong passwords from one address (LOGIN_MAX_FAILURES) lock that address out of that email, not the owner elsewhere", async () => {
    const owner = await registerUser(server);
    for (let i = 0; i < 3; i++) expect((await login("127.0.0.2", owner.email, "Wrong-password-1")).status).toBe(401);
    // The attacker's address: 429 with Retry-After, whatever the password.
    const blocked = await login("127.0.0.2", owner.email, owner.password);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.retryAfter)).toBeGreaterThan(0);
    // The owner from their own address: the slower path, and signed in.
    const mine = await login("127.0.0.3", owner.email, owner.password);
    expect(mine.status).toBe(200);
    expect(mine.ms).toBeGreaterThanOrEqual(SLOW_MS - 10);
    // The console sign-in is the same check.
    expect((await login("127.0.0.3", owner.email, owner.password, "/api/session")).status).toBe(200);
    // A typo by the owner is a slowed 401, never a 429.
    const typo = await login("127.0.0.3", owner.email, "Wrong-password-2");
    expect(typo.status).toBe(401);
    expect(typo.ms).toBeGreaterThanOrEqual(SLOW_MS - 10);
    expect((await login("127.0.0.3", owner.email, owner.password)).status).toBe(200);
  }, 240_000);

  it("attacks spread over many addresses still never lock the owner out; each address is cut at its own count", async () => {
    const owner = await registerUser(server);
    for (const from of ["127.0.1.1", "127.0.1.2"]) {
      for (let i = 0; i < 3; i++) expect((await login(from, owner.email, `Wrong-${from}-${i}`)).status).toBe(401);
      expect((await login(from, owner.email, "Wrong-again-1")).status).toBe(429);
    }
    expect((await login("127.0.1.9", owner.email, owner.password)).status).toBe(200);
  }, 240_000);

  it("one address failing across many emails (credential stuffing) is cut at LOGIN_MAX_FAILURES_PER_ADDRESS, other addresses unaffected", async () => {
    const users = await Promise.all(Array.from({ length: 2 }, () => registerUser(server)));
    const targets = Array.from({ length: 4 }, (_, i) => `stuffed-${Date.now()}-${i}@example.com`);
    for (const email of targets) expect((await login("127.0.2.1", email, "Wrong-password-1")).status).toBe(401);
    const cut = await login("127.0.2.1", users[0]!.email, users[0]!.password);
    expect(cut.status).toBe(429);
    for (const user of users) expect((await login("127.0.2.2", user.email, user.password)).status).toBe(200);
  }, 240_000);

  it("a user nobody attacks is never slowed", async () => {
    const user = await registerUser(server);
    expect((await login("127.0.3.1", user.email, "Wrong-password-1")).status).toBe(401);
    const ok = await login("127.0.3.1", user.email, user.password);
    expect(ok.status).toBe(200);
  }, 240_000);
});
