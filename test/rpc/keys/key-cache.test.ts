import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_JWT_SECRET, TEST_DATA_SECRET, bearer, newUserBody, startTestServer, type TestServer } from "../../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";
import { instanceRequest, startInstance, type Instance } from "../../helpers/instances.js";
import { platformAccount } from "../../helpers/chat.js";
import { withCookie } from "../../helpers/console.js";

/**
 * Verified keys are served from a short in-memory cache (storage/bus-cache.ts); every change
 * to a key reaches every instance through the bus, so the next request sees it.
 */

const chatBody = { model: "echo-1", messages: [{ role: "user", content: "hello there" }], max_tokens: 5 };

describe("one instance", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  const chat = (key: string) => server.request("/api/v1/chat/completions", { method: "POST", headers: bearer(key), json: chatBody });

  it("applies new limits and a revocation from the next request, cached or not", async () => {
    const account = await platformAccount(server);
    for (let i = 0; i < 3; i++) expect((await chat(account.key)).status).toBe(200);

    const patched = await server.request(`/api/api-keys/${account.keyId}`, {
      method: "PATCH",
      headers: withCookie(account.cookie),
      json: { rpmLimit: 1 },
    });
    expect(patched.status).toBe(200);
    expect((await chat(account.key)).status).toBe(200);
    const limited = await chat(account.key);
    expect(limited.status).toBe(429);
    expect(limited.body.error.message).toMatch(/1 requests per minute/);

    const revoked = await server.request(`/api/api-keys/${account.keyId}`, { method: "DELETE", headers: withCookie(account.cookie) });
    expect(revoked.status).toBeLessThan(300);
    const refused = await chat(account.key);
    expect(refused.status).toBe(401);
    expect(refused.body.error.message).toBe("Invalid or expired API key");
  });

  it("refuses a key of an archived workspace from the next request", async () => {
    const account = await platformAccount(server);
    expect((await chat(account.key)).status).toBe(200);
    await server.composition.ports.repos.tenants.putWorkspace({
      ...(await server.composition.ports.repos.tenants.getWorkspace(account.workspaceId))!,
      status: "archived",
    });
    const refused = await chat(account.key);
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toMatch(/archived/);
  });
});

describe("two instances on one Redis", () => {
  const prefix = uniqueRedisPrefix();
  let a: Instance;
  let b: Instance;
  let token: string;

  beforeAll(async () => {
    const env = {
      STORAGE: "redis",
      REDIS_PREFIX: prefix,
      GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
      DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
      LOG_LEVEL: "error",
    };
    [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
    token = (await instanceRequest(a.origin, "/gateway/v1/auth/register", { method: "POST", json: newUserBody() })).body.token;
  }, 60_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await dropRedisPrefix(prefix);
  });

  it("a key revoked on one instance is refused by the other on its next request", async () => {
    for (let round = 0; round < 5; round++) {
      const created = await instanceRequest(a.origin, "/gateway/v1/auth/keys", { method: "POST", token, json: { name: `k${round}` } });
      expect(created.status).toBe(201);
      const key = created.body.key as string;
      // Both instances have verified (and cached) the key.
      for (const origin of [b.origin, a.origin, b.origin]) {
        const answer = await instanceRequest(origin, "/gateway/v1/chat/completions", { method: "POST", token: key, json: chatBody });
        expect(answer.status).toBe(200);
        expect(answer.body.choices[0].message.content).toBeTypeOf("string");
      }
      const revoked = await instanceRequest(a.origin, `/gateway/v1/auth/keys/${created.body.id}`, { method: "DELETE", token });
      expect(revoked.status).toBeLessThan(300);
      // No wait: the very next request on the other instance.
      const refused = await instanceRequest(b.origin, "/gateway/v1/models", { token: key });
      expect(refused.status).toBe(401);
      expect((await instanceRequest(a.origin, "/gateway/v1/models", { token: key })).status).toBe(401);
    }
  });
});
