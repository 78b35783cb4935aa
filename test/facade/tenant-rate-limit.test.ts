import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";

/**
 * GATEWAY_TENANT_RATE_LIMIT_RPM (docs/quotas.md, docs/rate-limits.md): the Gateway's budget per
 * tenant, all of its users and keys together, next to each credential's own budget. A call
 * counts against the tenant it names when the caller belongs to it, else the caller's personal
 * tenant; X-RateLimit-* keep showing the credential's budget.
 */
describe("the tenant's Gateway budget", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ GATEWAY_TENANT_RATE_LIMIT_RPM: "5", GATEWAY_API_RATE_LIMIT_RPM: "100" });
  });
  afterAll(async () => {
    await server.close();
  });

  it("counts every member's calls and keys on the tenant they name, and refuses past it with 429; other tenants and strangers are not affected", async () => {
    const [alice, bob, carol] = await Promise.all([registerUser(server), registerUser(server), registerUser(server)]);
    const tenant = await server.request("/gateway/v1/tenants", {
      method: "POST",
      headers: bearer(alice.token),
      json: { slug: `budget-${Date.now().toString(36)}`, name: "Budget" },
    });
    expect(tenant.status).toBe(201);
    const tenantId = tenant.body.id as string;
    // 1 of the tenant's 5: adding a member names the tenant.
    expect(
      (
        await server.request(`/gateway/v1/tenants/${tenantId}/members`, {
          method: "POST",
          headers: bearer(alice.token),
          json: { userId: bob.user.id, role: "member" },
        })
      ).status,
    ).toBe(201);
    // alice's gateway key (a call of her personal tenant's budget).
    const key = (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(alice.token), json: { name: "k" } })).body
      .key as string;

    // A stranger naming the tenant is answered 404 and charged to their own tenant, not this one.
    for (let i = 0; i < 3; i++)
      expect((await server.request(`/gateway/v1/tenants/${tenantId}`, { headers: bearer(carol.token) })).status).toBe(404);

    const read = (credential: Record<string, string>) => server.request(`/gateway/v1/tenants/${tenantId}`, { headers: credential });
    expect((await read(bearer(alice.token))).status).toBe(200);
    expect((await read({ "x-api-key": key })).status).toBe(200);
    expect((await read(bearer(bob.token))).status).toBe(200);
    expect((await read({ "x-api-key": key })).status).toBe(200);

    const refused = await read(bearer(bob.token));
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.body.error).toEqual({
      code: "RATE_LIMITED",
      message: `Quota reached: this tenant made 6 Gateway API request(s) this minute, the most allowed (limit 5); retry later`,
      requestId: refused.headers.get("x-request-id"),
      details: {
        quota: "gateway_tenant_rpm",
        limit: 5,
        count: 6,
        tenantId,
        windowSeconds: 60,
        retryAfterSeconds: retryAfter,
        budget: "tenant",
      },
    });
    // The X-RateLimit-* headers are the credential's own budget, unchanged.
    expect(refused.headers.get("x-ratelimit-limit")).toBe("100");
    expect(Number(refused.headers.get("x-ratelimit-remaining"))).toBeGreaterThan(90);
    // Every member's every credential is refused on this tenant, over /rpc too.
    expect((await read({ "x-api-key": key })).status).toBe(429);
    const rpc = await server.request("/rpc", {
      method: "POST",
      headers: bearer(alice.token),
      json: { jsonrpc: "2.0", id: 1, method: "tenants.get", params: { tenant_id: tenantId } },
    });
    expect(rpc.body.error).toMatchObject({ code: -32029, data: { code: "RATE_LIMITED", status: 429 } });

    // Their personal tenants and the stranger's are other budgets: not affected.
    for (const who of [alice, bob, carol]) {
      const me = await server.request("/gateway/v1/auth/me", { headers: bearer(who.token) });
      expect(me.status).toBe(200);
      expect(me.headers.get("x-ratelimit-limit")).toBe("100");
    }
  });

  it("counts calls that name no tenant against the caller's personal tenant, all of the user's keys together", async () => {
    const dave = await registerUser(server);
    const keys: string[] = [];
    for (let i = 0; i < 2; i++)
      keys.push(
        (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(dave.token), json: { name: `k${i}` } })).body.key,
      );
    // Two calls made; three left for the session and both keys together.
    const statuses: number[] = [];
    for (const credential of [bearer(dave.token), { "x-api-key": keys[0]! }, { "x-api-key": keys[1]! }, { "x-api-key": keys[0]! }]) {
      statuses.push((await server.request("/gateway/v1/auth/me", { headers: credential })).status);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
  });
});

describe("the tenant's Gateway budget across two instances on one Redis", () => {
  const prefix = uniqueRedisPrefix();
  let one: TestServer;
  let two: TestServer;
  beforeAll(async () => {
    const env = { STORAGE: "redis", REDIS_PREFIX: prefix, GATEWAY_TENANT_RATE_LIMIT_RPM: "4" };
    [one, two] = await Promise.all([startTestServer(env), startTestServer(env)]);
  });
  afterAll(async () => {
    for (const server of [one, two]) await server?.close();
    await dropRedisPrefix(prefix);
  });

  it("shares one budget per tenant: calls of its credentials on either instance count, and both refuse past it", async () => {
    const user = await registerUser(one);
    const other = await registerUser(two);
    const key = (await two.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(user.token), json: { name: "k" } })).body
      .key as string;
    const statuses: number[] = [];
    for (const [server, credential] of [
      [one, bearer(user.token)],
      [two, { "x-api-key": key }],
      [one, { "x-api-key": key }],
    ] as const) {
      statuses.push((await server.request("/gateway/v1/auth/me", { headers: credential })).status);
    }
    expect(statuses).toEqual([200, 200, 200]);
    for (const server of [one, two]) {
      const refused = await server.request("/gateway/v1/auth/me", { headers: bearer(user.token) });
      expect(refused.status).toBe(429);
      expect(refused.body.error.details).toMatchObject({
        quota: "gateway_tenant_rpm",
        limit: 4,
        tenantId: user.user.tenantId,
        budget: "tenant",
      });
    }
    expect((await one.request("/gateway/v1/auth/me", { headers: bearer(other.token) })).status).toBe(200);
  });
});
