import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentTimestamp } from "../../../rpc/time.js";
import { eventually } from "../../helpers/eventually.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

const G = "/gateway/v1";
/** Spec 2.6: ISO 8601 without a zone suffix. */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/;

let server: TestServer;
let alice: { token: string; user: { id: string; tenantId: string } };
let bob: { token: string };

beforeAll(async () => {
  server = await startTestServer();
  alice = await registerUser(server);
  bob = await registerUser(server);
});
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

const as = (token: string) => bearer(token);
const create = (body: Record<string, unknown>, token = alice.token) =>
  server.request(`${G}/agents`, { method: "POST", headers: as(token), json: body });
const basic = { name: "helper", model: "echo-1", tools: ["calculator"], description: "adds things", config: {} };

describe("Gateway agents by id", () => {
  it("creates an agent with exactly the docs/interface.md 2.6 fields and zone-less timestamps", async () => {
    const res = await create({ ...basic, config: { maxSteps: 3, systemPrompt: "Use tools.", temperature: 0.5 } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual([
      "config",
      "createdAt",
      "description",
      "id",
      "model",
      "name",
      "status",
      "tenantId",
      "tools",
      "updatedAt",
    ]);
    expect(res.body).toMatchObject({
      name: "helper",
      model: "echo-1",
      tools: ["calculator"],
      status: "idle",
      description: "adds things",
      config: { maxSteps: 3, systemPrompt: "Use tools.", temperature: 0.5 },
      tenantId: alice.user.tenantId,
    });
    expect(res.body.createdAt).toMatch(TIMESTAMP);
    expect(res.body.updatedAt).toBe(res.body.createdAt);
    // UTC: the wall-clock time now, without the Z.
    expect(Math.abs(Date.parse(`${res.body.createdAt}Z`) - Date.now())).toBeLessThan(60_000);
  });

  it("fills in config defaults, lists as a bare array and reads one by id", async () => {
    const created = (await create({ name: "defaults", model: "echo-1" })).body;
    expect(created).toMatchObject({ tools: [], description: "", config: { maxSteps: 8 } });
    const list = await server.request(`${G}/agents`, { headers: as(alice.token) });
    expect(list.status).toBe(200);
    expect(Array.isArray(list.body)).toBe(true);
    expect(list.body.map((agent: any) => agent.id)).toContain(created.id);
    const one = await server.request(`${G}/agents/${created.id}`, { headers: as(alice.token) });
    expect(one.body).toEqual(created);
  });

  it("works with an sk_ gateway key as well as a session", async () => {
    const key = (await server.request(`${G}/auth/keys`, { method: "POST", headers: as(alice.token), json: { name: "ci" } })).body
      .key as string;
    const viaKey = await server.request(`${G}/agents`, {
      method: "POST",
      headers: { "x-api-key": key },
      json: { name: "via-key", model: "echo-1" },
    });
    expect(viaKey.status).toBe(201);
    const listed = await server.request(`${G}/agents`, { headers: bearer(key) });
    expect(listed.body.map((agent: any) => agent.id)).toContain(viaKey.body.id);
    expect((await server.request(`${G}/agents`)).status).toBe(401);
  });

  it("refuses unknown tools and models with 400 naming each", async () => {
    const res = await create({ name: "bad", model: "no-such-model", tools: ["calculator", "nope", "vm__ghost__x"] });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain("nope");
    expect(res.body.error.message).toContain("vm__ghost__x");
    expect(res.body.error.message).toContain("no-such-model");
    expect(res.body.error.details).toMatchObject({
      unknownTools: ["nope", "vm__ghost__x"],
      unknownModel: "no-such-model",
      usableModels: ["echo-1"],
    });
    expect(res.body.error.message).not.toContain("calculator ");
  });

  it("validates config", async () => {
    for (const config of [{ maxSteps: 0 }, { maxSteps: 1.5 }, { temperature: 3 }, { nonsense: true }, { toolTimeoutSeconds: -1 }]) {
      const res = await create({ ...basic, config });
      expect(res.status, JSON.stringify(config)).toBe(400);
      expect(res.body.error.code).toBe("VALIDATION_FAILED");
    }
    expect((await create({ ...basic, name: "" })).status).toBe(400);
    expect((await create({ ...basic, tools: "calculator" })).status).toBe(400);
  });

  it("updates description and tools partially", async () => {
    const agent = (await create(basic)).body;
    // The clock has moved past the creation's millisecond, so the update's timestamp can be later.
    await eventually(() => agentTimestamp() > agent.updatedAt);
    const described = await server.request(`${G}/agents/${agent.id}`, {
      method: "PUT",
      headers: as(alice.token),
      json: { description: "new words" },
    });
    expect(described.status).toBe(200);
    expect(described.body).toMatchObject({ description: "new words", tools: ["calculator"], name: "helper", createdAt: agent.createdAt });
    expect(described.body.updatedAt).toMatch(TIMESTAMP);
    expect(described.body.updatedAt > agent.updatedAt).toBe(true);
    const retooled = await server.request(`${G}/agents/${agent.id}`, {
      method: "PUT",
      headers: as(alice.token),
      json: { tools: ["text_stats", "current_time"] },
    });
    expect(retooled.body).toMatchObject({ description: "new words", tools: ["text_stats", "current_time"] });
    const bad = await server.request(`${G}/agents/${agent.id}`, {
      method: "PUT",
      headers: as(alice.token),
      json: { tools: ["missing_tool"] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.unknownTools).toEqual(["missing_tool"]);
    expect((await server.request(`${G}/agents/${agent.id}`, { headers: as(alice.token) })).body.tools).toEqual([
      "text_stats",
      "current_time",
    ]);
  });

  it("gives another user's agent the same 404 as a missing one, on every route", async () => {
    const agent = (await create(basic)).body;
    const routes: [string, string, unknown?][] = [
      ["GET", ""],
      ["PUT", "", { description: "x" }],
      ["DELETE", ""],
      ["POST", "/invoke", { input: "hi" }],
      ["GET", "/logs"],
      ["POST", "/deploy"],
    ];
    for (const [method, suffix, json] of routes) {
      const theirs = await server.request(`${G}/agents/${agent.id}${suffix}`, { method, headers: as(bob.token), json });
      const missing = await server.request(`${G}/agents/agt_missing${suffix}`, { method, headers: as(bob.token), json });
      expect(theirs.status, `${method} ${suffix}`).toBe(404);
      expect(missing.status).toBe(404);
      expect(theirs.body.error.code).toBe(missing.body.error.code);
    }
    expect((await server.request(`${G}/agents`, { headers: as(bob.token) })).body).toEqual([]);
    expect((await server.request(`${G}/agents/${agent.id}`, { headers: as(alice.token) })).status).toBe(200);
  });

  it("deletes with {success: true}, logs and all", async () => {
    const agent = (await create(basic)).body;
    const res = await server.request(`${G}/agents/${agent.id}`, { method: "DELETE", headers: as(alice.token) });
    expect(res).toMatchObject({ status: 200, body: { success: true } });
    expect((await server.request(`${G}/agents/${agent.id}`, { headers: as(alice.token) })).status).toBe(404);
    expect((await server.request(`${G}/agents/${agent.id}`, { method: "DELETE", headers: as(alice.token) })).status).toBe(404);
    expect(await server.composition.ports.repos.agents.logs(agent.id)).toEqual([]);
  });

  it("invokes the built-in echo model without tools", async () => {
    const agent = (await create({ name: "echo", model: "echo-1" })).body;
    const res = await server.request(`${G}/agents/${agent.id}/invoke`, {
      method: "POST",
      headers: as(alice.token),
      json: { input: "say these words" },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "completed", output: "say these words", steps: [] });
    expect(res.body.usage.total_tokens).toBeGreaterThan(0);
    expect(res.body.startedAt).toMatch(TIMESTAMP);
    expect(res.body.finishedAt).toMatch(TIMESTAMP);
    expect((await server.request(`${G}/agents/${agent.id}/invoke`, { method: "POST", headers: as(alice.token), json: {} })).status).toBe(
      400,
    );
  });

  it("runs tools with the built-in echo model via a /tool directive, no network needed", async () => {
    const agent = (await create({ name: "echo-tools", model: "echo-1", tools: ["calculator"] })).body;
    const res = await server.request(`${G}/agents/${agent.id}/invoke`, {
      method: "POST",
      headers: as(alice.token),
      json: { input: '/tool calculator {"expression": "3*(4+5)"}' },
    });
    expect(res.body).toMatchObject({
      status: "completed",
      output: "27",
      steps: [{ tool: "calculator", arguments: { expression: "3*(4+5)" }, error: null }],
    });
    // A tool the agent was not given is not called: the directive is echoed back.
    const other = await server.request(`${G}/agents/${agent.id}/invoke`, {
      method: "POST",
      headers: as(alice.token),
      json: { input: "/tool text_stats {}" },
    });
    expect(other.body).toMatchObject({ status: "completed", output: "/tool text_stats {}", steps: [] });
  });

  it("is reachable over JSON-RPC by method name", async () => {
    const res = await server.request("/rpc", {
      method: "POST",
      headers: as(alice.token),
      json: { jsonrpc: "2.0", id: 1, method: "agents.list", params: {} },
    });
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body.result)).toBe(true);
  });
});

describe("the deploy state machine", () => {
  const post = (id: string, action: string) => server.request(`${G}/agents/${id}/${action}`, { method: "POST", headers: as(alice.token) });

  it("moves idle → deployed ⇄ paused and refuses other transitions with 409", async () => {
    const agent = (await create({ name: "lifecycle", model: "echo-1" })).body;
    expect((await post(agent.id, "pause")).status).toBe(409);
    expect((await post(agent.id, "resume")).status).toBe(409);

    const deployed = await post(agent.id, "deploy");
    expect(deployed).toMatchObject({ status: 200, body: { id: agent.id, status: "deployed" } });
    const again = await post(agent.id, "deploy");
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: "CONFLICT", message: "The agent is already deployed", details: { status: "deployed" } });

    expect((await post(agent.id, "pause")).body.status).toBe("paused");
    const refused = await server.request(`${G}/agents/${agent.id}/invoke`, {
      method: "POST",
      headers: as(alice.token),
      json: { input: "hi" },
    });
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain("paused");
    expect((await post(agent.id, "deploy")).status).toBe(409);

    expect((await post(agent.id, "resume")).body.status).toBe("deployed");
    const ran = await server.request(`${G}/agents/${agent.id}/invoke`, { method: "POST", headers: as(alice.token), json: { input: "hi" } });
    expect(ran.body.status).toBe("completed");
    // After an invocation the agent is back in its lifecycle state.
    expect((await server.request(`${G}/agents/${agent.id}`, { headers: as(alice.token) })).body.status).toBe("deployed");

    const events = (await server.request(`${G}/agents/${agent.id}/logs`, { headers: as(alice.token) })).body.logs.map(
      (entry: any) => entry.event,
    );
    expect(events).toEqual(["agent.created", "agent.deploy", "agent.pause", "agent.resume", "invocation.started", "invocation.finished"]);
  });

  it("lets exactly one of two concurrent deploys win", async () => {
    const agent = (await create({ name: "race", model: "echo-1" })).body;
    const results = await Promise.all([post(agent.id, "deploy"), post(agent.id, "deploy"), post(agent.id, "deploy")]);
    expect(results.map((res) => res.status).sort()).toEqual([200, 409, 409]);
  });
});
