import { scryptSync } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  DEFAULT_HASH_CONCURRENCY,
  hashingStats,
  resetHashingPeak,
  setHashConcurrency,
  verifyPassword,
} from "../../../rpc/credentials/passwords.js";
import { newUserBody, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * Password hashing is bounded so it cannot take every libuv pool thread from storage
 * (docs/benchmarks.md "Login flood" has the timing figures; here only the bound itself).
 */

/** A stored hash with cheap parameters, so many checks run quickly. */
function cheapStored(password: string): string {
  const salt = Buffer.from("0123456789abcdef");
  const key = scryptSync(password.normalize("NFKC"), salt, 32, { N: 1024, r: 8, p: 1 });
  return ["scrypt", 1024, 8, 1, salt.toString("base64url"), key.toString("base64url")].join("$");
}

describe("password hash concurrency", () => {
  afterEach(() => setHashConcurrency(DEFAULT_HASH_CONCURRENCY));

  it(`never runs more than ${DEFAULT_HASH_CONCURRENCY} hashes at once by default; the rest queue and all complete`, async () => {
    const stored = cheapStored("Correct-Horse-9");
    resetHashingPeak();
    const checks = Array.from({ length: 24 }, (_, i) => verifyPassword(i % 2 ? "Correct-Horse-9" : "wrong-password", stored));
    expect(hashingStats()).toMatchObject({ held: DEFAULT_HASH_CONCURRENCY, waiting: 24 - DEFAULT_HASH_CONCURRENCY });
    const results = await Promise.all(checks);
    expect(results).toEqual(Array.from({ length: 24 }, (_, i) => i % 2 === 1));
    expect(hashingStats()).toEqual({ held: 0, waiting: 0, peak: DEFAULT_HASH_CONCURRENCY });
  });

  it("follows PASSWORD_HASH_CONCURRENCY, 0 meaning unbounded", async () => {
    const stored = cheapStored("x");
    setHashConcurrency(3);
    resetHashingPeak();
    await Promise.all(Array.from({ length: 10 }, () => verifyPassword("x", stored)));
    expect(hashingStats().peak).toBe(3);
    setHashConcurrency(0);
    resetHashingPeak();
    await Promise.all(Array.from({ length: 10 }, () => verifyPassword("x", stored)));
    expect(hashingStats().peak).toBe(10);
  });

  it("raising the limit starts queued hashes at once", async () => {
    const stored = cheapStored("y");
    setHashConcurrency(1);
    resetHashingPeak();
    const checks = Promise.all(Array.from({ length: 6 }, () => verifyPassword("y", stored)));
    expect(hashingStats()).toMatchObject({ held: 1, waiting: 5 });
    setHashConcurrency(4);
    expect(hashingStats()).toMatchObject({ held: 4, waiting: 2 });
    expect(await checks).toEqual(Array(6).fill(true));
  });
});

describe("failed logins over the real transport", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ LOGIN_MAX_FAILURES: "100" });
  });
  afterAll(async () => {
    await server.close();
  });

  it("a burst of failed logins runs at most PASSWORD_HASH_CONCURRENCY hashes at once, and every one is answered 401", async () => {
    const user = await registerUser(server);
    resetHashingPeak();
    const attempts = Array.from({ length: 4 }, (_, i) =>
      server.request("/gateway/v1/auth/login", {
        method: "POST",
        json: { email: i % 2 ? user.email : newUserBody().email, password: "Wrong-Horse-99" },
      }),
    );
    const statuses = (await Promise.all(attempts)).map((res) => res.status);
    expect(statuses).toEqual(Array(4).fill(401));
    expect(hashingStats().peak).toBeLessThanOrEqual(DEFAULT_HASH_CONCURRENCY);
  });
});
