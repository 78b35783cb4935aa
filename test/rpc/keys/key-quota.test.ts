import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { consoleSignIn, withCookie } from "../../helpers/console.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";

/**
 * QUOTA_KEYS_PER_USER (docs/quotas.md): the live keys a user created, of every kind (gateway
 * `sk_…`, personal `acct_…`, console platform keys), counted together; one more is a 409 in
 * each surface's envelope, and another user is not affected.
 */
describe("keys per user", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ QUOTA_KEYS_PER_USER: "3" });
  });
  afterAll(async () => {
    await server.close();
  });

  it("counts gateway, personal and platform keys together and refuses the next one on every surface", async () => {
    const alice = await registerUser(server);
    const bob = await registerUser(server);
    const cookie = await consoleSignIn(server, alice.email, alice.password);
    const gateway = () => server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(alice.token), json: { name: "ci" } });
    const personal = () => server.request("/account/v1/keys", { method: "POST", headers: bearer(alice.token), json: { name: "laptop" } });
    const platform = () => server.request("/api/api-keys", { method: "POST", headers: withCookie(cookie), json: { name: "prod" } });

    expect((await gateway()).status).toBe(201);
    expect((await personal()).status).toBe(201);
    const made = await platform();
    expect(made.status).toBe(201);

    const refused = await gateway();
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({
      error: {
        code: "CONFLICT",
        message: "Quota reached: this user has 3 live API key(s), the most allowed (limit 3); revoke one first",
        requestId: refused.headers.get("x-request-id"),
        details: { quota: "keys_per_user", limit: 3, count: 3 },
      },
    });
    // The caller is told the limit, never the operator's variable; the request's log line names it.
    expect(JSON.stringify(refused.body)).not.toMatch(/QUOTA_/);
    expect(server.logs().find((line) => line.requestId === refused.body.error.requestId)).toMatchObject({
      status: 409,
      operatorNote: { quota: "keys_per_user", variable: "QUOTA_KEYS_PER_USER" },
    });
    const account = await personal();
    expect(account.status).toBe(409);
    expect(account.body).toEqual({
      error: { message: expect.stringContaining("live API key(s), the most allowed (limit 3)"), type: "invalid_request_error" },
    });
    const console = await platform();
    expect(console.status).toBe(409);
    expect(console.body).toEqual({ error: { message: expect.stringContaining("live API key(s), the most allowed (limit 3)") } });
    // Over /rpc, the same refusal as a JSON-RPC error with the details.
    const rpc = await server.request("/rpc", {
      method: "POST",
      headers: bearer(alice.token),
      json: { jsonrpc: "2.0", id: 1, method: "auth.keys.create", params: { name: "x" } },
    });
    expect(rpc.body.error).toMatchObject({ code: -32009, data: { code: "CONFLICT", status: 409 } });

    // Bob, another user (another tenant), is not affected.
    for (let i = 0; i < 3; i++) {
      expect(
        (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(bob.token), json: { name: `b${i}` } })).status,
      ).toBe(201);
    }

    // A revoked key no longer counts: revoking the platform key makes room for one more.
    expect((await server.request(`/api/api-keys/${made.body.id}`, { method: "DELETE", headers: withCookie(cookie) })).status).toBe(200);
    expect((await gateway()).status).toBe(201);
    expect((await personal()).status).toBe(409);
    const keys = await server.request("/gateway/v1/auth/keys", { headers: bearer(alice.token) });
    expect(keys.body).toHaveLength(2);
  });

  it("lets N concurrent creates at the edge take exactly the places left", async () => {
    const carol = await registerUser(server);
    expect(
      (await server.request("/account/v1/keys", { method: "POST", headers: bearer(carol.token), json: { name: "first" } })).status,
    ).toBe(201);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(carol.token), json: { name: `k${i}` } }),
      ),
    );
    expect(results.filter((res) => res.status === 201)).toHaveLength(2);
    expect(results.filter((res) => res.status === 409)).toHaveLength(10);
    expect((await server.request("/gateway/v1/auth/keys", { headers: bearer(carol.token) })).body).toHaveLength(2);
  });
});

describe("keys per user across two instances on one Redis", () => {
  const prefix = uniqueRedisPrefix();
  let one: TestServer;
  let two: TestServer;
  beforeAll(async () => {
    const env = { STORAGE: "redis", REDIS_PREFIX: prefix, QUOTA_KEYS_PER_USER: "4" };
    [one, two] = await Promise.all([startTestServer(env), startTestServer(env)]);
  });
  afterAll(async () => {
    for (const server of [one, two]) await server?.close();
    await dropRedisPrefix(prefix);
  });

  it("never lets concurrent creates on both instances pass the quota", async () => {
    const dave = await registerUser(one);
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        (i % 2 ? one : two).request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(dave.token), json: { name: `k${i}` } }),
      ),
    );
    expect(results.filter((res) => res.status === 201)).toHaveLength(4);
    expect(results.filter((res) => res.status === 409).every((res) => res.body.error.details.count === 4)).toBe(true);
    expect((await two.request("/gateway/v1/auth/keys", { headers: bearer(dave.token) })).body).toHaveLength(4);
  });
});
