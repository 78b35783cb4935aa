import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/** docs/quotas.md: webhook subscriptions per tenant. Before, subscriptions had no cap. */
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: "true", WEBHOOKS_POLL_MS: "0", QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT: "2" });
});
afterAll(async () => {
  await server?.close();
});

const create = (token: string) => server.request("/gateway/v1/webhooks/subscriptions", { method: "POST", headers: bearer(token), json: { url: "http://127.0.0.1:9/hook" } });

describe("webhook subscriptions per tenant", () => {
  it("one tenant at its quota gets 409 in the Gateway envelope; another tenant is unaffected; concurrent creates never pass it", async () => {
    const [full, other, racing] = [await registerUser(server), await registerUser(server), await registerUser(server)];
    expect((await create(full.token)).status).toBe(201);
    expect((await create(full.token)).status).toBe(201);
    const refused = await create(full.token);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "CONFLICT", message: expect.stringContaining("QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT=2"), details: { quota: "webhookSubscriptionsPerTenant", limit: 2, count: 2, tenantId: full.user.tenantId } });
    expect((await server.request("/gateway/v1/webhooks/subscriptions", { headers: bearer(full.token) })).body.data).toHaveLength(2);
    for (let i = 0; i < 2; i++) expect((await create(other.token)).status).toBe(201);
    // A delete frees a place.
    const first = (await server.request("/gateway/v1/webhooks/subscriptions", { headers: bearer(full.token) })).body.data[0].id;
    expect((await server.request(`/gateway/v1/webhooks/subscriptions/${first}`, { method: "DELETE", headers: bearer(full.token) })).status).toBe(200);
    expect((await create(full.token)).status).toBe(201);
    const statuses = (await Promise.all(Array.from({ length: 6 }, () => create(racing.token)))).map((res) => res.status).sort();
    expect(statuses).toEqual([201, 201, 409, 409, 409, 409]);
  });
});
