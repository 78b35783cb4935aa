import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { platformAccount } from "../../helpers/chat.js";
import { createOpenAiUpstream } from "../../../mocks/openai-upstream.js";

/**
 * The Account API's `/agent/*` (docs/interface.md 4.1, 5; docs/agents.md "Account API"): a personal key with
 * scope `compute` lists, creates, reads, invokes (JSON and SSE), reads the logs of, cancels
 * runs of and deletes the user's agents, and sees the tools they may call; a key with only
 * `intelligence` gets 403 INSUFFICIENT_CAPABILITY; another user's agent is the same 404 as a
 * missing one and stays untouched.
 */

const UPSTREAM = "http://account-agents.upstream.test/v1";
const upstream = createOpenAiUpstream(UPSTREAM);
const msw = mockUpstreams(...upstream.handlers);
const A = "/account/v1/agent";

let server: TestServer;
let alice: Awaited<ReturnType<typeof registerUser>>;
let bob: Awaited<ReturnType<typeof registerUser>>;
let aliceKey: string;
let aliceChatOnly: string;
let bobKey: string;

async function personalKey(token: string, scopes?: string[]) {
  const res = await server.request("/account/v1/keys", {
    method: "POST",
    headers: bearer(token),
    json: { name: "cli", ...(scopes ? { scopes } : {}) },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.key as string;
}

/** The `data:` frames of an SSE answer, parsed. */
async function frames(response: Response): Promise<any[]> {
  return (await response.text())
    .split("\n\n")
    .map((block) => block.trim())
    .filter((block) => block.startsWith("data: "))
    .map((block) => JSON.parse(block.slice(6)));
}

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({
      models: { vendor: { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), upstreamModel: "vendor-agents" } },
    }),
  });
  [alice, bob] = await Promise.all([registerUser(server), registerUser(server)]);
  aliceKey = await personalKey(alice.token);
  aliceChatOnly = await personalKey(alice.token, ["intelligence"]);
  bobKey = await personalKey(bob.token, ["compute"]);
});
afterAll(async () => {
  await msw.close();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

describe("Account API /agent/*", () => {
  let agentId: string;

  it("creates, lists and reads the user's agents with a compute key; the Gateway sees the same agent", async () => {
    const created = await server.request(`${A}/agents`, {
      method: "POST",
      headers: bearer(aliceKey),
      json: { name: "helper", model: "vendor", tools: ["calculator"], description: "adds things", config: { maxSteps: 2 } },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: "helper",
      model: "vendor",
      tools: ["calculator"],
      status: "idle",
      description: "adds things",
      tenantId: alice.user.tenantId,
    });
    agentId = created.body.id;
    expect(agentId).toMatch(/^agt_/);

    const list = await server.request(`${A}/agents`, { headers: bearer(aliceKey) });
    expect(list.status).toBe(200);
    expect(Array.isArray(list.body)).toBe(true);
    expect(list.body.map((agent: { id: string }) => agent.id)).toEqual([agentId]);
    const one = await server.request(`${A}/agents/${agentId}`, { headers: bearer(aliceKey) });
    expect(one.body).toEqual(list.body[0]);
    const viaGateway = await server.request(`/gateway/v1/agents/${agentId}`, { headers: bearer(alice.token) });
    expect(viaGateway.body).toEqual(one.body);

    // A tool the catalog does not have is named in the 400, with where to look.
    const bad = await server.request(`${A}/agents`, {
      method: "POST",
      headers: bearer(aliceKey),
      json: { name: "x", model: "vendor", tools: ["no_such_tool"] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain("GET /agent/tools");
  });

  it("shows the tools the agent may call, and the catalog to pick them from", async () => {
    const tools = await server.request(`${A}/agents/${agentId}/tools`, { headers: bearer(aliceKey) });
    expect(tools.status).toBe(200);
    expect(tools.body).toMatchObject({ agentId, unavailable: [] });
    expect(tools.body.tools).toHaveLength(1);
    expect(tools.body.tools[0]).toMatchObject({ name: "calculator", inputSchema: { type: "object" } });
    const catalog = await server.request(`${A}/tools`, { headers: bearer(aliceKey) });
    expect(catalog.status).toBe(200);
    expect(catalog.body.tools.map((tool: { name: string }) => tool.name)).toContain("calculator");
    expect(catalog.body.count).toBe(catalog.body.tools.length);
  });

  it("invokes the agent, answering JSON or the run's events over SSE, and keeps its logs", async () => {
    upstream.script("vendor-agents", { kind: "reply", words: ["all", " done"] });
    const answer = await server.request(`${A}/agents/${agentId}/invoke`, {
      method: "POST",
      headers: bearer(aliceKey),
      json: { input: "do it" },
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ agentId, status: "completed", output: "all done", runId: expect.stringMatching(/^run_/) });

    const streamed = await fetch(server.url(`${A}/agents/${agentId}/invoke`), {
      method: "POST",
      headers: { ...bearer(aliceKey), "content-type": "application/json" },
      body: JSON.stringify({ input: "again", stream: true }),
    });
    expect(streamed.status).toBe(200);
    expect(streamed.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = await frames(streamed);
    expect(events.map((event) => event.type)).toContain("chunk");
    expect(events.at(-1)).toMatchObject({ type: "done", result: { status: "completed", output: "all done" } });
    expect(new Set(events.map((event) => event.runId)).size).toBe(1);

    const logs = await server.request(`${A}/agents/${agentId}/logs?lines=50`, { headers: bearer(aliceKey) });
    expect(logs.status).toBe(200);
    expect(logs.body.agentId).toBe(agentId);
    const started = logs.body.logs.filter((entry: { event: string }) => entry.event === "invocation.started");
    expect(started).toHaveLength(2);
  });

  it("cancels a running invocation by its run id", async () => {
    upstream.script("vendor-agents", { kind: "stream", words: ["thinking", " more"], hangAfter: 1 });
    const controller = new AbortController();
    const streamed = await fetch(server.url(`${A}/agents/${agentId}/invoke`), {
      method: "POST",
      headers: { ...bearer(aliceKey), "content-type": "application/json" },
      body: JSON.stringify({ input: "take your time", stream: true }),
      signal: controller.signal,
    });
    const reader = streamed.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!/"runId":"(run_[^"]+)"/.test(text)) text += decoder.decode((await reader.read()).value, { stream: true });
    const runId = /"runId":"(run_[^"]+)"/.exec(text)![1]!;

    // Another user cannot cancel it: the same 404 as a run that does not exist.
    const foreign = await server.request(`${A}/runs/${runId}/cancel`, { method: "POST", headers: bearer(bobKey) });
    const missing = await server.request(`${A}/runs/run_doesnotexist/cancel`, { method: "POST", headers: bearer(bobKey) });
    expect(foreign.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(foreign.body).toEqual({ error: { message: expect.any(String), type: "not_found_error" } });

    const cancelled = await server.request(`${A}/runs/${runId}/cancel`, { method: "POST", headers: bearer(aliceKey) });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toEqual({ runId, agentId, cancelled: true });
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(text).toContain('"status":"cancelled"');
  });

  it("refuses a personal key without compute with 403 INSUFFICIENT_CAPABILITY on every route, before touching anything", async () => {
    const routes: [string, string, unknown?][] = [
      ["GET", `${A}/agents`],
      ["POST", `${A}/agents`, { name: "nope", model: "vendor" }],
      ["GET", `${A}/agents/${agentId}`],
      ["DELETE", `${A}/agents/${agentId}`],
      ["POST", `${A}/agents/${agentId}/invoke`, { input: "x" }],
      ["GET", `${A}/agents/${agentId}/logs`],
      ["GET", `${A}/agents/${agentId}/tools`],
      ["GET", `${A}/tools`],
      ["POST", `${A}/runs/run_x/cancel`],
    ];
    for (const [method, path, json] of routes) {
      const res = await server.request(path, { method, headers: bearer(aliceChatOnly), ...(json ? { json } : {}) });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body).toEqual({ error: expect.stringContaining("compute"), code: "INSUFFICIENT_CAPABILITY" });
    }
    // Sessions, Gateway and Platform keys are not Account credentials: 401.
    const platform = await platformAccount(server);
    for (const token of [alice.token, platform.key]) {
      const res = await server.request(`${A}/agents`, { headers: bearer(token) });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code: "UNAUTHORIZED" });
    }
    expect((await server.request(`${A}/agents/${agentId}`, { headers: bearer(aliceKey) })).status).toBe(200);
  });

  it("gives another user's agent the same 404 as a missing one, and leaves it untouched", async () => {
    const before = await server.request(`${A}/agents/${agentId}/logs?lines=1000`, { headers: bearer(aliceKey) });
    const calls = upstream.calls.length;
    expect((await server.request(`${A}/agents`, { headers: bearer(bobKey) })).body).toEqual([]);
    const routes: [string, string, unknown?][] = [
      ["GET", ""],
      ["DELETE", ""],
      ["POST", "/invoke", { input: "steal" }],
      ["GET", "/logs"],
      ["GET", "/tools"],
    ];
    for (const [method, suffix, json] of routes) {
      const foreign = await server.request(`${A}/agents/${agentId}${suffix}`, {
        method,
        headers: bearer(bobKey),
        ...(json ? { json } : {}),
      });
      const missing = await server.request(`${A}/agents/agt_doesnotexist${suffix}`, {
        method,
        headers: bearer(bobKey),
        ...(json ? { json } : {}),
      });
      expect(foreign.status, `${method} ${suffix}`).toBe(404);
      expect(missing.status).toBe(404);
      expect(foreign.body.error.message.replace(agentId, "ID")).toBe(missing.body.error.message.replace("agt_doesnotexist", "ID"));
    }
    expect(upstream.calls.length).toBe(calls);
    const after = await server.request(`${A}/agents/${agentId}/logs?lines=1000`, { headers: bearer(aliceKey) });
    expect(after.body).toEqual(before.body);
    expect((await server.request(`${A}/agents/${agentId}`, { headers: bearer(aliceKey) })).body.name).toBe("helper");
  });

  it("is on /rpc and in the OpenAPI document under /account/v1/agent", async () => {
    const rpc = await server.request("/rpc", {
      method: "POST",
      headers: bearer(aliceKey),
      json: { jsonrpc: "2.0", id: 1, method: "account.agents.get", params: { agent_id: agentId } },
    });
    expect(rpc.body.result).toMatchObject({ id: agentId, name: "helper" });
    // The name before the one naming scheme still answers, deprecated (docs/versioning.md).
    const former = await server.request("/rpc", {
      method: "POST",
      headers: bearer(aliceKey),
      json: { jsonrpc: "2.0", id: 2, method: "account.agent.get", params: { agent_id: agentId } },
    });
    expect(former.body.result).toEqual(rpc.body.result);
    const doc = (await server.request("/openapi.json")).body;
    expect(doc.paths["/account/v1/agent/agents/{agent_id}"].get).toMatchObject({
      "x-jsonrpc-method": "account.agents.get",
      "x-jsonrpc-deprecated-names": ["account.agent.get"],
    });
    for (const path of [
      "/agent/agents",
      "/agent/agents/{agent_id}",
      "/agent/agents/{agent_id}/invoke",
      "/agent/agents/{agent_id}/logs",
      "/agent/agents/{agent_id}/tools",
      "/agent/tools",
      "/agent/runs/{run_id}/cancel",
    ]) {
      expect(Object.keys(doc.paths), path).toContain(`/account/v1${path}`);
    }
    expect(Object.keys(doc.paths["/account/v1/agent/agents/{agent_id}"])).toEqual(expect.arrayContaining(["get", "delete"]));
  });

  it("deletes the agent; it is then gone on both surfaces", async () => {
    const deleted = await server.request(`${A}/agents/${agentId}`, { method: "DELETE", headers: bearer(aliceKey) });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true });
    expect((await server.request(`${A}/agents/${agentId}`, { headers: bearer(aliceKey) })).status).toBe(404);
    expect((await server.request(`/gateway/v1/agents/${agentId}`, { headers: bearer(alice.token) })).status).toBe(404);
  });
});
