import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT (docs/quotas.md): a tenant's subscriptions, whoever
 * of its members made them; one more is a 409 with the quota's details; another tenant is not
 * affected; concurrent creates never pass it.
 */
describe("webhook subscriptions per tenant", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT: "3", WEBHOOKS_ALLOW_PRIVATE: "true", WEBHOOKS_POLL_MS: "0" });
  });
  afterAll(async () => {
    await server.close();
  });

  const subscribe = (token: string, tenantId?: string) =>
    server.request("/gateway/v1/webhooks/subscriptions", {
      method: "POST",
      headers: bearer(token),
      json: { url: "http://127.0.0.1:9/hook", ...(tenantId ? { tenantId } : {}) },
    });

  it("counts every member's subscriptions of one tenant and leaves other tenants alone", async () => {
    const alice = await registerUser(server);
    const bob = await registerUser(server);
    const tenant = await server.request("/gateway/v1/tenants", {
      method: "POST",
      headers: bearer(alice.token),
      json: { slug: `hooks-${Date.now().toString(36)}`, name: "Hooks" },
    });
    expect(tenant.status).toBe(201);
    const tenantId = tenant.body.id as string;
    expect(
      (
        await server.request(`/gateway/v1/tenants/${tenantId}/members`, {
          method: "POST",
          headers: bearer(alice.token),
          json: { userId: bob.user.id, role: "admin" },
        })
      ).status,
    ).toBe(201);

    expect((await subscribe(alice.token, tenantId)).status).toBe(201);
    expect((await subscribe(alice.token, tenantId)).status).toBe(201);
    const third = await subscribe(bob.token, tenantId);
    expect(third.status).toBe(201);
    const refused = await subscribe(bob.token, tenantId);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toEqual({
      code: "CONFLICT",
      message: "Quota reached: this tenant has 3 webhook subscription(s), the most allowed (limit 3); delete one first",
      requestId: refused.headers.get("x-request-id"),
      details: {
        quota: "webhook_subscriptions_per_tenant",
        limit: 3,
        count: 3,
        tenantId,
      },
    });

    // The members' personal tenants are other tenants: not affected.
    expect((await subscribe(alice.token)).status).toBe(201);
    expect((await subscribe(bob.token)).status).toBe(201);

    // A deleted subscription makes room again.
    expect(
      (await server.request(`/gateway/v1/webhooks/subscriptions/${third.body.id}`, { method: "DELETE", headers: bearer(bob.token) }))
        .status,
    ).toBe(200);
    expect((await subscribe(alice.token, tenantId)).status).toBe(201);
    expect((await subscribe(alice.token, tenantId)).status).toBe(409);
    const list = await server.request(`/gateway/v1/webhooks/subscriptions?tenantId=${tenantId}`, { headers: bearer(alice.token) });
    expect(list.body.data).toHaveLength(3);
  });

  it("lets N concurrent creates at the edge take exactly the places left", async () => {
    const carol = await registerUser(server);
    expect((await subscribe(carol.token)).status).toBe(201);
    const results = await Promise.all(Array.from({ length: 10 }, () => subscribe(carol.token)));
    expect(results.filter((res) => res.status === 201)).toHaveLength(2);
    expect(results.filter((res) => res.status === 409)).toHaveLength(8);
    expect((await server.request("/gateway/v1/webhooks/subscriptions", { headers: bearer(carol.token) })).body.data).toHaveLength(3);
  });
});
