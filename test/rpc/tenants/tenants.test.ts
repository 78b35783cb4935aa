import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { createToolCallingUpstream } from "../../../mocks/openai-tools.js";

const G = "/gateway/v1";
const BASE = "http://models.tenants.test/v1";
const upstream = createToolCallingUpstream(BASE);
const msw = mockUpstreams(...upstream.handlers);

let server: TestServer;
let alice: { token: string; user: { id: string; tenantId: string } };
let bob: { token: string };

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({ models: { metered: { provider: "openai-compatible", baseURL: msw.url(BASE) } } }),
    TENANT_DEFAULT_AGENT_LIMIT: "7",
    TENANT_DEFAULT_TOKENS_PER_MONTH: "12345",
  });
  alice = await registerUser(server);
  bob = await registerUser(server);
});
afterAll(async () => {
  await msw.close();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});
beforeEach(() => upstream.reset());

const as = (token: string) => bearer(token);
let slugCounter = 0;
async function createTenant(limits?: Record<string, number>, token = alice.token) {
  const res = await server.request(`${G}/tenants`, {
    method: "POST",
    headers: as(token),
    json: { slug: `team-${++slugCounter}-${Date.now()}`, name: "Team", plan: "pro", region: "eu-west", limits },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}
// maxTokens 2: each model turn holds its prompt estimate plus 2 tokens of the tenant's month.
const createAgent = (tenantId: string | undefined, name = "a", model = "metered") =>
  server.request(`${G}/agents`, {
    method: "POST",
    headers: as(alice.token),
    json: { name, model, tools: [], description: "", config: { maxTokens: 2 }, ...(tenantId ? { tenantId } : {}) },
  });
const invoke = (id: string) =>
  server.request(`${G}/agents/${id}/invoke`, { method: "POST", headers: as(alice.token), json: { input: "hi" } });

describe("tenants", () => {
  it("lists the personal tenant first, then created ones", async () => {
    const created = await createTenant({ agents: 3, tokensPerMonth: 1000 });
    expect(created).toMatchObject({
      name: "Team",
      plan: "pro",
      region: "eu-west",
      limits: { agents: 3, tokensPerMonth: 1000 },
      usage: { agents: 0, tokensThisMonth: 0 },
      ownerId: alice.user.id,
    });
    const list = await server.request(`${G}/tenants`, { headers: as(alice.token) });
    expect(list.status).toBe(200);
    expect(list.body[0].id).toBe(alice.user.tenantId);
    expect(list.body.map((tenant: any) => tenant.id)).toContain(created.id);
    expect((await server.request(`${G}/tenants`, { headers: as(bob.token) })).body.map((tenant: any) => tenant.id)).not.toContain(
      created.id,
    );
  });

  it("uses the configured defaults when limits are left out, for the personal tenant too", async () => {
    const created = await createTenant();
    expect(created.limits).toEqual({ agents: 7, tokensPerMonth: 12345 });
    const personal = await server.request(`${G}/tenants/${alice.user.tenantId}`, { headers: as(alice.token) });
    expect(personal.body.limits).toEqual({ agents: 7, tokensPerMonth: 12345 });
  });

  it("refuses a taken slug (409) and bad bodies (400)", async () => {
    const first = await createTenant();
    const dup = await server.request(`${G}/tenants`, { method: "POST", headers: as(bob.token), json: { slug: first.slug, name: "Copy" } });
    expect(dup.status).toBe(409);
    for (const body of [
      { slug: "Bad Slug", name: "x" },
      { slug: "ok-slug-1", name: "" },
      { slug: "ok-slug-2", name: "x", limits: { agents: -1 } },
      { slug: "ok-slug-3", name: "x", limits: { tokensPerMonth: 1.5 } },
    ]) {
      expect(
        (await server.request(`${G}/tenants`, { method: "POST", headers: as(alice.token), json: body })).status,
        JSON.stringify(body),
      ).toBe(400);
    }
  });

  it("reads and patches only the owner's tenants (404 for others)", async () => {
    const tenant = await createTenant({ agents: 1, tokensPerMonth: 10 });
    expect((await server.request(`${G}/tenants/${tenant.id}`, { headers: as(alice.token) })).body.slug).toBe(tenant.slug);
    expect((await server.request(`${G}/tenants/${tenant.id}`, { headers: as(bob.token) })).status).toBe(404);
    expect(
      (await server.request(`${G}/tenants/${tenant.id}`, { method: "PATCH", headers: as(bob.token), json: { name: "mine" } })).status,
    ).toBe(404);
    const patched = await server.request(`${G}/tenants/${tenant.id}`, {
      method: "PATCH",
      headers: as(alice.token),
      json: { name: "Renamed", limits: { agents: 4 } },
    });
    expect(patched.body).toMatchObject({ name: "Renamed", plan: "pro", limits: { agents: 4, tokensPerMonth: 10 } });
    // An agent in someone else's tenant: the same 404.
    const res = await server.request(`${G}/agents`, {
      method: "POST",
      headers: as(bob.token),
      json: { name: "x", model: "metered", tenantId: tenant.id },
    });
    expect(res.status).toBe(404);
  });
});

describe("tenant limits", () => {
  it("caps the number of agents with 403, and frees a slot on delete", async () => {
    const tenant = await createTenant({ agents: 1, tokensPerMonth: 1000 });
    const first = await createAgent(tenant.id);
    expect(first.status).toBe(201);
    expect(first.body.tenantId).toBe(tenant.id);
    const second = await createAgent(tenant.id, "b");
    expect(second.status).toBe(403);
    expect(second.body.error.message).toContain("Agent limit reached");
    expect(second.body.error.details).toMatchObject({ tenantId: tenant.id, limit: 1 });
    expect((await server.request(`${G}/tenants/${tenant.id}`, { headers: as(alice.token) })).body.usage.agents).toBe(1);
    await server.request(`${G}/agents/${first.body.id}`, { method: "DELETE", headers: as(alice.token) });
    expect((await createAgent(tenant.id, "c")).status).toBe(201);
    // Raising the limit lets more in.
    await server.request(`${G}/tenants/${tenant.id}`, { method: "PATCH", headers: as(alice.token), json: { limits: { agents: 2 } } });
    expect((await createAgent(tenant.id, "d")).status).toBe(201);
  });

  it("frees exactly one slot when the same agent is deleted twice at once", async () => {
    const tenant = await createTenant({ agents: 1, tokensPerMonth: 1000 });
    const agent = (await createAgent(tenant.id)).body;
    const deletes = await Promise.all(
      [1, 2, 3].map(() => server.request(`${G}/agents/${agent.id}`, { method: "DELETE", headers: as(alice.token) })),
    );
    expect(deletes.map((res) => res.status).sort()).toEqual([200, 404, 404]);
    expect((await server.request(`${G}/tenants/${tenant.id}`, { headers: as(alice.token) })).body.usage.agents).toBe(0);
    expect((await createAgent(tenant.id, "x")).status).toBe(201);
    expect((await createAgent(tenant.id, "y")).status).toBe(403);
  });

  it("never lets concurrent creates pass the agent limit", async () => {
    const tenant = await createTenant({ agents: 2, tokensPerMonth: 1000 });
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => createAgent(tenant.id, `n${i}`)));
    expect(results.filter((res) => res.status === 201)).toHaveLength(2);
    expect(results.filter((res) => res.status === 403)).toHaveLength(4);
  });

  it("refuses invocations with 429 once nothing of the month's tokens remains", async () => {
    upstream.script("metered", () => ({ text: "ok", usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } }));
    // A turn holds 8 (prompt "hi") + 2 (maxTokens) and uses 15: admitted at 0 and 15 used of 30, refused at 30.
    const tenant = await createTenant({ agents: 5, tokensPerMonth: 30 });
    const agent = (await createAgent(tenant.id)).body;
    expect((await invoke(agent.id)).body.status).toBe("completed");
    expect((await invoke(agent.id)).body.status).toBe("completed");
    const refused = await invoke(agent.id);
    expect(refused.status).toBe(429);
    expect(refused.body.error.message).toContain("Token allowance spent");
    expect(refused.body.error.message).toContain("used 30 of 30 tokens this month");
    expect(refused.body.error.details).toMatchObject({ used: 30, limit: 30, requested: 10 });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(upstream.calls).toHaveLength(2);
    expect((await server.request(`${G}/tenants/${tenant.id}`, { headers: as(alice.token) })).body.usage.tokensThisMonth).toBe(30);
    // Raising the allowance lets invocations through again.
    await server.request(`${G}/tenants/${tenant.id}`, {
      method: "PATCH",
      headers: as(alice.token),
      json: { limits: { tokensPerMonth: 100 } },
    });
    expect((await invoke(agent.id)).status).toBe(200);
  });

  it("stops a run mid-way when the allowance runs out between model turns", async () => {
    upstream.script("metered", () => ({ toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }] }));
    // Turn worst cases: 10, then 19 (the tool round adds to the prompt: 17), then 28 (prompt 26);
    // each turn uses 15. The second's prompt fits in the 20 that remain: held capped at 20; the
    // third's prompt of 26 does not fit in the 5 left, so it is refused before the model runs.
    const tenant = await createTenant({ agents: 5, tokensPerMonth: 35 });
    const created = await server.request(`${G}/agents`, {
      method: "POST",
      headers: as(alice.token),
      json: { name: "loop", model: "metered", tools: ["calculator"], tenantId: tenant.id, config: { maxTokens: 2 } },
    });
    const res = await invoke(created.body.id);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: "error",
      error: expect.stringContaining("its prompt of 26 tokens is more than the 5 tokens left"),
      usage: { total_tokens: 30 },
    });
    expect(res.body.steps).toHaveLength(2);
    expect(upstream.calls).toHaveLength(2);
    // A month with less left than the second turn's prompt: the run stops after one turn, within the month.
    const small = await createTenant({ agents: 5, tokensPerMonth: 30 });
    const smaller = await server.request(`${G}/agents`, {
      method: "POST",
      headers: as(alice.token),
      json: { name: "loop", model: "metered", tools: ["calculator"], tenantId: small.id, config: { maxTokens: 2 } },
    });
    const stopped = await invoke(smaller.body.id);
    expect(stopped.body).toMatchObject({
      status: "error",
      error: expect.stringContaining("Token allowance too small for this model turn: its prompt of 17 tokens"),
      usage: { total_tokens: 15 },
    });
    expect(upstream.calls).toHaveLength(3);
    expect((await server.request(`${G}/tenants/${small.id}`, { headers: as(alice.token) })).body.usage.tokensThisMonth).toBe(15);
    // A run that ended in error shows it until the next good run or a deploy.
    expect((await server.request(`${G}/agents/${created.body.id}`, { headers: as(alice.token) })).body.status).toBe("error");
  });

  it("counts the personal tenant's usage too", async () => {
    upstream.script("metered", () => ({ text: "fine", usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } }));
    const agent = (await createAgent(undefined, "personal")).body;
    expect(agent.tenantId).toBe(alice.user.tenantId);
    await invoke(agent.id);
    const personal = (await server.request(`${G}/tenants/${alice.user.tenantId}`, { headers: as(alice.token) })).body;
    expect(personal.usage.tokensThisMonth).toBe(7);
    expect(personal.usage.agents).toBeGreaterThanOrEqual(1);
  });
});
