import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * Sign-in throttling that does not lock the owner out (docs/security.md "Sign-in throttling"):
 * failures count per email and source address, attempts past the limit take the slow path, and
 * the right password signs in from any address. Sources are distinct loopback addresses
 * (127.0.x.y). Which path an attempt took is read from its log line (`signIn`), not from timing:
 * each password check is a half-second scrypt, whatever else the machine does.
 */

let server: TestServer;

beforeAll(async () => {
  // One failure per email and address, ten per email across addresses.
  server = await startTestServer({ LOGIN_MAX_FAILURES: "1", LOGIN_SLOW_MS: "200" });
});
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server?.close();
});

/** `POST /gateway/v1/auth/login` from source address `from`; `path` is what its log line says. */
async function login(from: string, email: string, password: string): Promise<{ status: number; retryAfter?: string; path: unknown }> {
  const { port } = new URL(server.origin);
  const body = JSON.stringify({ email, password });
  const requestId = `login-${Math.random().toString(36).slice(2)}`;
  const answer = await new Promise<{ status: number; retryAfter?: string }>((resolve, reject) => {
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port: Number(port),
        localAddress: from,
        path: "/gateway/v1/auth/login",
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), "x-request-id": requestId },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode!, retryAfter: res.headers["retry-after"] as string | undefined }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
  const line = server.logs().find((entry) => entry.clientRequestId === requestId);
  return { ...answer, path: line?.signIn ?? "direct" };
}

const WRONG = "Wrong-password-1";

describe("sign-in throttling", () => {
  it("wrong passwords from one address do not lock the owner out: another address signs in directly", async () => {
    const owner = await registerUser(server);
    expect(await login("127.0.0.2", owner.email, WRONG)).toMatchObject({ status: 401, path: "direct" });
    const attacker = await login("127.0.0.2", owner.email, WRONG);
    expect(attacker).toMatchObject({ status: 429, path: "slowed" });
    expect(Number(attacker.retryAfter)).toBeGreaterThan(0);
    expect(await login("127.0.0.3", owner.email, owner.password)).toMatchObject({ status: 200, path: "direct" });
  });

  it("from the guessing address itself, the right password signs in on the slow path, and clears that address's failures", async () => {
    const owner = await registerUser(server);
    expect((await login("127.0.0.4", owner.email, WRONG)).status).toBe(401);
    expect(await login("127.0.0.4", owner.email, owner.password)).toMatchObject({ status: 200, path: "slowed" });
    expect(await login("127.0.0.4", owner.email, WRONG)).toMatchObject({ status: 401, path: "direct" });
  });

  it("guesses spread over many addresses slow every attempt on that email, and never refuse the right password", async () => {
    const owner = await registerUser(server);
    const spread = await Promise.all(Array.from({ length: 10 }, (_, a) => login(`127.0.1.${a + 10}`, owner.email, WRONG)));
    expect(spread.map((attempt) => attempt.status)).toEqual(Array(10).fill(401));
    expect(await login("127.0.2.1", owner.email, WRONG)).toMatchObject({ status: 429, path: "slowed" });
    expect(await login("127.0.2.2", owner.email, owner.password)).toMatchObject({ status: 200, path: "slowed" });
  });

  it("slow-path attempts on one email run one at a time: concurrent guesses are refused without a password check", async () => {
    const owner = await registerUser(server);
    expect((await login("127.0.0.5", owner.email, WRONG)).status).toBe(401);
    const burst = await Promise.all(Array.from({ length: 6 }, () => login("127.0.0.5", owner.email, WRONG)));
    expect(burst.map((attempt) => attempt.status)).toEqual(Array(6).fill(429));
    expect(burst.filter((attempt) => attempt.path === "slowed")).toHaveLength(1);
    expect(burst.filter((attempt) => attempt.path === "busy")).toHaveLength(5);
  });

  it("an unknown email is throttled like a known one (no account discovery)", async () => {
    expect(await login("127.0.0.6", "nobody-here@example.com", WRONG)).toMatchObject({ status: 401, path: "direct" });
    expect(await login("127.0.0.6", "nobody-here@example.com", WRONG)).toMatchObject({ status: 429, path: "slowed" });
  });
}, 120_000);
