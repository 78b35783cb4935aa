import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * QUOTA_MCP_SERVERS_PER_TENANT (docs/quotas.md): upstream MCP servers a tenant registers; one
 * more is a 409 with the quota's details, another tenant is not affected, concurrent
 * registrations never pass it. The servers here are down (a closed port): they are kept and
 * count all the same.
 */
describe("upstream MCP servers per tenant", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      QUOTA_MCP_SERVERS_PER_TENANT: "2",
      MCP_SERVERS_ALLOW_PRIVATE: "true",
      GATEWAY_TIMEOUT_SECONDS: "1",
      GATEWAY_MAX_RETRIES: "0",
    });
  });
  afterAll(async () => {
    await server.close();
  });

  const register = (token: string, name: string) =>
    server.request("/gateway/v1/mcp/servers", { method: "POST", headers: bearer(token), json: { name, url: "http://127.0.0.1:9/mcp" } });

  it("refuses a tenant's third server with a 409 naming the quota, and not another tenant's", async () => {
    const alice = await registerUser(server);
    const bob = await registerUser(server);
    expect((await register(alice.token, "one")).status).toBe(201);
    expect((await register(alice.token, "two")).status).toBe(201);
    const refused = await register(alice.token, "three");
    expect(refused.status).toBe(409);
    expect(refused.body.error).toEqual({
      code: "CONFLICT",
      message: "Quota reached: this tenant has 2 MCP server(s), the most allowed (limit 2); delete one first",
      requestId: refused.headers.get("x-request-id"),
      details: {
        quota: "mcp_servers_per_tenant",
        limit: 2,
        count: 2,
        tenantId: alice.user.tenantId,
      },
    });
    // Bob's tenant is another tenant; the same names are his to take.
    expect((await register(bob.token, "one")).status).toBe(201);
    expect((await register(bob.token, "three")).status).toBe(201);

    expect((await server.request("/gateway/v1/mcp/servers/one", { method: "DELETE", headers: bearer(alice.token) })).status).toBe(200);
    expect((await register(alice.token, "three")).status).toBe(201);
    const listed = await server.request("/gateway/v1/mcp/servers", { headers: bearer(alice.token) });
    expect(listed.body.servers.map((entry: { name: string }) => entry.name)).toEqual(["three", "two"]);
  });

  it("lets N concurrent registrations at the edge take exactly the places left", async () => {
    const carol = await registerUser(server);
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => register(carol.token, `s${i}`)));
    expect(results.filter((res) => res.status === 201)).toHaveLength(2);
    expect(results.filter((res) => res.status === 409)).toHaveLength(6);
    expect((await server.request("/gateway/v1/mcp/servers", { headers: bearer(carol.token) })).body.count).toBe(2);
  });
});
