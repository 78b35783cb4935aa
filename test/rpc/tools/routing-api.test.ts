import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { connectVm, vmSocketUrl, type TestVm } from "../../helpers/vm.js";
import { eventually } from "../../helpers/eventually.js";
import { createToolCallingUpstream } from "../../../mocks/openai-tools.js";
import { serveScripted } from "../../helpers/upstream.js";

/** Gateway routing over real HTTP: no model configured, so plans come from the ranking. */
let server: TestServer;
let token: string;
let other: string;
let vm: TestVm;
/** Every `tools/call` the VM received: ask without approve must add nothing here. */
const vmCalls: { name: string; arguments: Record<string, unknown> }[] = [];

const vmTools = [
  {
    name: "grep_files",
    description: "Searches files in the workspace for lines matching a pattern.",
    category: "files",
    inputSchema: {
      type: "object",
      properties: { pattern: { type: "string", description: "Regular expression" } },
      required: ["pattern"],
      additionalProperties: false,
    },
  },
  {
    name: "remote_clock",
    description: "Reports the VM's own clock: its local time and uptime.",
    category: "system",
    inputSchema: { type: "object", properties: {} },
  },
  { name: "explode", description: "Always fails, to test failure handling of plans.", inputSchema: { type: "object", properties: {} } },
  { name: "hold", description: "Waits until the test releases it.", inputSchema: { type: "object", properties: {} } },
];
/** Releases the pending `hold` calls. */
const held: (() => void)[] = [];

const post = (path: string, json: unknown, auth = token) =>
  server.request(`/gateway/v1${path}`, { method: "POST", headers: bearer(auth), json });
const get = (path: string, auth = token) => server.request(`/gateway/v1${path}`, { headers: bearer(auth) });

beforeAll(async () => {
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({ models: {} }),
    MCP_SERVERS_ALLOW_PRIVATE: "true",
    GATEWAY_RATE_LIMIT_RPM: "10000",
  });
  token = (await registerUser(server)).token;
  other = (await registerUser(server)).token;
  vm = await connectVm(vmSocketUrl(server.origin, "agent-1", { vmId: "box" }), token, {
    "tools/call": ({ name, arguments: args }) => {
      vmCalls.push({ name, arguments: args });
      if (name === "explode") throw new Error("boom on purpose");
      if (name === "hold") return new Promise((resolve) => held.push(() => resolve({ content: [{ type: "text", text: "released" }] })));
      if (name === "grep_files") return { content: [{ type: "text", text: `3 matches for ${args.pattern}` }] };
      return { content: [{ type: "text", text: "12:00 up 3 days" }] };
    },
  });
  await vm.register(vmTools);
});
afterAll(async () => {
  await vm.close();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});
beforeEach(() => {
  vmCalls.length = 0;
});

describe("GET /mcp/router/tools", () => {
  it("lists built-in and the caller's VM tools with their server", async () => {
    const res = await get("/mcp/router/tools");
    expect(res.status).toBe(200);
    const byName = new Map(res.body.tools.map((tool: any) => [tool.name, tool]));
    expect(byName.get("calculator")).toMatchObject({ server: "builtin", tool: "calculator", category: "math" });
    expect(byName.get("vm__box__grep_files")).toMatchObject({
      server: "vm:box",
      tool: "grep_files",
      category: "files",
      description: vmTools[0]!.description,
    });
    expect(res.body.count).toBe(res.body.tools.length);
  });

  it("never shows another tenant's VM tools", async () => {
    const res = await get("/mcp/router/tools", other);
    expect(res.status).toBe(200);
    expect(res.body.tools.some((tool: any) => tool.server.startsWith("vm:"))).toBe(false);
    expect(res.body.tools.some((tool: any) => tool.name === "calculator")).toBe(true);
  });

  it("needs a credential", async () => {
    expect((await server.request("/gateway/v1/mcp/router/tools")).status).toBe(401);
  });
});

describe("upstream MCP servers", () => {
  it("routes to an upstream server's tool, named by its server, and runs it in a plan", async () => {
    const weather = await serveScripted([
      {
        tool: {
          name: "forecast",
          description: "Weather forecast (temperature, rain) for a city over the next days.",
          inputSchema: { type: "object", properties: { city: { type: "string", description: "City name" } }, required: ["city"] },
        },
        run: (args) => ({ content: [{ type: "text", text: `sunny in ${String(args.city)}` }] }),
      },
    ]);
    try {
      const created = await post("/mcp/servers", { name: "weather", url: weather.url, category: "weather" });
      expect(created.status).toBe(201);
      const listed = await get("/mcp/router/tools");
      expect(listed.body.tools.find((tool: any) => tool.name === "weather__forecast")).toMatchObject({
        server: "weather",
        tool: "forecast",
        category: "weather",
      });
      const routed = await post("/mcp/route", { input: "will it rain tomorrow? weather forecast for Oslo", preferredMcp: "weather" });
      expect(routed.body).toMatchObject({ server: "weather", tool: "weather__forecast" });
      const run = await post("/mcp/execute", { steps: [{ tool: "weather__forecast", args: { city: "Oslo" } }] });
      expect(run.body.steps[0]).toMatchObject({
        server: "weather",
        status: "completed",
        result: { content: [{ type: "text", text: "sunny in Oslo" }] },
      });
      expect((await server.request("/gateway/v1/mcp/servers/weather", { method: "DELETE", headers: bearer(token) })).status).toBe(200);
      expect((await post("/mcp/route", { input: "weather forecast for Oslo" })).body.tool).not.toBe("weather__forecast");
    } finally {
      await weather.close();
    }
  });
});

describe("POST /mcp/route", () => {
  it.each([
    ["what is 17 * 23?", "builtin", "calculator"],
    ["what time is it in Europe/Berlin", "builtin", "current_time"],
    ["fetch the page at https://example.com", "builtin", "http_fetch"],
    ["how many words are in this text", "builtin", "text_stats"],
    ["search the workspace files for TODO", "vm:box", "vm__box__grep_files"],
  ])("%s → %s %s", async (input, serverName, tool) => {
    const res = await post("/mcp/route", { input, tenantId: undefined, preferredMcp: "" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ server: serverName, tool });
    expect(res.body.score).toBeGreaterThan(0);
    expect(Array.isArray(res.body.alternatives)).toBe(true);
    for (const alternative of res.body.alternatives) expect(alternative.score).toBeLessThanOrEqual(res.body.score);
    expect(typeof res.body.reason).toBe("string");
  });

  it("the preferred server wins when it has any match", async () => {
    const plain = await post("/mcp/route", { input: "what is the current time" });
    expect(plain.body.tool).toBe("current_time");
    const clock = plain.body.alternatives.find((entry: any) => entry.tool === "vm__box__remote_clock");
    expect(clock.score).toBeLessThan(plain.body.score);
    const preferred = await post("/mcp/route", { input: "what is the current time", preferredMcp: "vm:box" });
    expect(preferred.body).toMatchObject({ server: "vm:box", tool: "vm__box__remote_clock", score: clock.score });
    expect(preferred.body.alternatives[0]).toMatchObject({ tool: "current_time" });
    expect(preferred.body.reason).toMatch(/Preferred server vm:box/);
    // A VM may be named by its id alone.
    expect((await post("/mcp/route", { input: "what is the current time", preferredMcp: "box" })).body.tool).toBe("vm__box__remote_clock");
  });

  it("a preferred server without a match does not win", async () => {
    const res = await post("/mcp/route", { input: "fetch the page at https://example.com", preferredMcp: "vm:box" });
    expect(res.body.tool).toBe("http_fetch");
    expect(res.body.reason).toMatch(/preferred server vm:box has no matching tool/);
  });

  it("answers tool null when nothing matches", async () => {
    const res = await post("/mcp/route", { input: "xylophone quokka" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ server: null, tool: null, score: 0, alternatives: [], reason: "No tool matches the request" });
  });

  it("rebuilds its index when the catalog changes", async () => {
    expect((await post("/mcp/route", { input: "deploy the service to staging" })).body.tool).toBeNull();
    const second = await connectVm(vmSocketUrl(server.origin, "agent-2", { vmId: "deployer" }), token, {
      "tools/call": () => ({ content: [] }),
    });
    await second.register([{ name: "deploy_service", description: "Deploys a service to an environment (staging, production)." }]);
    expect((await post("/mcp/route", { input: "deploy the service to staging" })).body).toMatchObject({
      server: "vm:deployer",
      tool: "vm__deployer__deploy_service",
    });
    await second.close();
    await eventually(async () => (await post("/mcp/route", { input: "deploy the service to staging" })).body.tool === null);
  });

  it("400s without input, with a non-string input, and for another user's tenant 404", async () => {
    for (const body of [{}, { input: "" }, { input: "   " }, { input: 42 }]) {
      const res = await post("/mcp/route", body);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("VALIDATION_FAILED");
    }
    const otherTenant = (await registerUser(server)).user.tenantId;
    expect((await post("/mcp/route", { input: "time", tenantId: otherTenant })).status).toBe(404);
  });
});

describe("plans from the ranking and their execution", () => {
  it("splits the request into steps with arguments read from each clause, and executes them", async () => {
    const res = await post("/mcp/plan", {
      input: 'calculate 2 * (3 + 4) then tell me the time in Europe/Paris; and then count the words of "one two three"',
    });
    expect(res.status).toBe(201);
    const plan = res.body;
    expect(plan).toMatchObject({
      status: "planned",
      planner: { kind: "ranking" },
      unmatched: [],
      input: expect.stringContaining("calculate"),
    });
    expect(plan.id).toMatch(/^plan_/);
    expect(plan.steps.map((step: any) => [step.index, step.server, step.tool, step.args])).toEqual([
      [0, "builtin", "calculator", { expression: "2 * (3 + 4)" }],
      [1, "builtin", "current_time", { timezone: "Europe/Paris" }],
      [2, "builtin", "text_stats", { text: "one two three" }],
    ]);
    for (const step of plan.steps) expect(step.reason).toMatch(/BM25/);

    const run = await post("/mcp/execute", { planId: plan.id });
    expect(run.status).toBe(200);
    expect(run.body).toMatchObject({ id: plan.id, status: "completed", failedStep: null, error: null });
    expect(run.body.steps[0]).toMatchObject({ status: "completed", error: null, result: { structuredContent: { result: 14 } } });
    expect(run.body.steps[1].result.structuredContent.timezone).toBe("Europe/Paris");
    expect(run.body.steps[2].result.structuredContent.words).toBe(3);
    for (const step of run.body.steps) expect(step.durationMs).toBeGreaterThanOrEqual(0);

    // Stored: the results are there on a later read.
    const stored = await get(`/mcp/plans/${plan.id}`);
    expect(stored.body).toMatchObject({
      status: "completed",
      steps: [{ status: "completed" }, { status: "completed" }, { status: "completed" }],
    });
  });

  it("records clauses nothing matched and arguments it could not read", async () => {
    const res = await post("/mcp/plan", { input: "calculate something nice then juggle flamingos", maxSteps: 3 });
    expect(res.status).toBe(201);
    expect(res.body.steps).toHaveLength(1);
    expect(res.body.steps[0]).toMatchObject({ tool: "calculator", args: {}, missing: ["expression"] });
    expect(res.body.unmatched).toEqual(["juggle flamingos"]);
    // Missing arguments are caught before anything runs.
    const run = await post("/mcp/execute", { planId: res.body.id });
    expect(run.status).toBe(400);
    expect(run.body.error).toMatchObject({ code: "VALIDATION_FAILED", details: { step: 0, tool: "calculator" } });
    expect((await get(`/mcp/plans/${res.body.id}`)).body.status).toBe("planned");
  });

  it("caps the steps at maxSteps", async () => {
    const res = await post("/mcp/plan", { input: "compute 1+1; compute 2+2; compute 3+3", maxSteps: 2 });
    expect(res.body.steps).toHaveLength(2);
    expect(res.body.unmatched).toEqual(["compute 3+3"]);
  });

  it("lists the caller's plans newest first, and hides them from others", async () => {
    const first = (await post("/mcp/plan", { input: "compute 5*5" })).body;
    const second = (await post("/mcp/plan", { input: "compute 6*6" })).body;
    const list = await get("/mcp/plans");
    expect(list.status).toBe(200);
    const ids = list.body.plans.map((plan: any) => plan.id);
    expect(ids.indexOf(second.id)).toBeLessThan(ids.indexOf(first.id));
    expect(list.body.count).toBe(ids.length);

    expect((await get("/mcp/plans", other)).body).toEqual({ plans: [], count: 0 });
    const read = await get(`/mcp/plans/${first.id}`, other);
    expect(read.status).toBe(404);
    const run = await post("/mcp/execute", { planId: first.id }, other);
    expect(run.status).toBe(404);
    expect((await get(`/mcp/plans/${first.id}`)).body.status).toBe("planned");
    expect((await get("/mcp/plans/plan_missing")).status).toBe(404);
  });

  it("runs inline steps and stops at the first failing one", async () => {
    const res = await post("/mcp/execute", {
      steps: [
        { tool: "calculator", args: { expression: "1+1" } },
        { tool: "vm__box__explode", args: {} },
        { tool: "calculator", args: { expression: "2+2" } },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "failed", failedStep: 1, planner: { kind: "caller" } });
    expect(res.body.error).toMatch(/Step 1 \(vm__box__explode\) failed: .*boom on purpose/);
    expect(res.body.steps.map((step: any) => step.status)).toEqual(["completed", "failed", "skipped"]);
    expect(res.body.steps[1].server).toBe("vm:box");
    expect(vmCalls.map((call) => call.name)).toEqual(["explode"]);
    // Stored like any plan.
    expect((await get(`/mcp/plans/${res.body.id}`)).body.status).toBe("failed");
  });

  it("runs one execution of a plan at a time, and shows progress while it runs", async () => {
    const first = post("/mcp/execute", { steps: [{ tool: "calculator", args: { expression: "1+1" } }, { tool: "vm__box__hold" }] });
    await eventually(() => held.length === 1);
    const running = (await get("/mcp/plans")).body.plans.find((plan: any) => plan.status === "running");
    expect(running.steps.map((step: any) => step.status)).toEqual(["completed", "pending"]);
    expect((await post("/mcp/execute", { planId: running.id })).status).toBe(409);
    held.shift()!();
    const done = await first;
    expect(done.body).toMatchObject({ id: running.id, status: "completed" });
    expect(done.body.steps[1].result.content[0].text).toBe("released");
    // A finished plan can run again.
    const again = post("/mcp/execute", { planId: running.id });
    await eventually(() => held.length === 1);
    held.shift()!();
    expect((await again).body.status).toBe("completed");
  });

  it("is reachable over JSON-RPC too", async () => {
    const res = await server.request("/rpc", {
      method: "POST",
      headers: bearer(token),
      json: { jsonrpc: "2.0", id: 1, method: "mcp.route", params: { input: "what is 3 + 4" } },
    });
    expect(res.body.result).toMatchObject({ server: "builtin", tool: "calculator" });
    const bad = await server.request("/rpc", {
      method: "POST",
      headers: bearer(token),
      json: { jsonrpc: "2.0", id: 2, method: "mcp.route", params: {} },
    });
    expect(bad.body.error.code).toBe(-32602);
  });

  it("checks every step's args before running any", async () => {
    const res = await post("/mcp/execute", {
      steps: [
        { tool: "vm__box__grep_files", args: { pattern: "x" } },
        { tool: "calculator", args: { expression: 12 } },
      ],
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "VALIDATION_FAILED", details: { step: 1 } });
    expect(vmCalls).toEqual([]);
    expect((await post("/mcp/execute", { steps: [{ tool: "no_such_tool" }] })).status).toBe(404);
    // Another tenant cannot run this tenant's VM tool: it is unknown to them.
    expect((await post("/mcp/execute", { steps: [{ tool: "vm__box__grep_files", args: { pattern: "x" } }] }, other)).status).toBe(404);
    expect(vmCalls).toEqual([]);
  });

  it("400s on bad plan and execute bodies", async () => {
    expect((await post("/mcp/plan", {})).status).toBe(400);
    expect((await post("/mcp/plan", { input: "compute 1+1", maxSteps: 0 })).status).toBe(400);
    expect((await post("/mcp/plan", { input: "compute 1+1", maxSteps: "3" })).status).toBe(400);
    expect((await post("/mcp/execute", {})).status).toBe(400);
    expect((await post("/mcp/execute", { planId: "plan_x", steps: [{ tool: "calculator" }] })).status).toBe(400);
    expect((await post("/mcp/execute", { steps: [] })).status).toBe(400);
  });
});

describe("POST /mcp/ask", () => {
  it("proposes without running anything unless approved", async () => {
    const res = await post("/mcp/ask", { input: "search the workspace files for 'TODO'", vmId: "box" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ executed: false, proposed: { server: "vm:box", tool: "vm__box__grep_files" } });
    expect(res.body.proposed.score).toBeGreaterThan(0);
    expect(res.body.result).toBeUndefined();
    const explicit = await post("/mcp/ask", {
      input: "search the workspace files",
      vmId: "box",
      approve: false,
      toolInput: { pattern: "FIXME" },
    });
    expect(explicit.body).toMatchObject({ executed: false, proposed: { tool: "vm__box__grep_files", args: { pattern: "FIXME" } } });
    expect(vmCalls).toEqual([]);
  });

  it("runs on the VM when approved, with toolInput as the arguments", async () => {
    const res = await post("/mcp/ask", {
      input: "search the workspace files",
      vmId: "box",
      approve: true,
      toolInput: { pattern: "FIXME" },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      executed: true,
      proposed: { server: "vm:box", tool: "vm__box__grep_files", args: { pattern: "FIXME" } },
    });
    expect(res.body.result).toEqual({ content: [{ type: "text", text: "3 matches for FIXME" }] });
    expect(vmCalls).toEqual([{ name: "grep_files", arguments: { pattern: "FIXME" } }]);
  });

  it("runs built-ins with arguments read from the request", async () => {
    const res = await post("/mcp/ask", { input: "calculate (1 + 2) * 10", approve: true });
    expect(res.body).toMatchObject({
      executed: true,
      proposed: { server: "builtin", tool: "calculator", args: { expression: "(1 + 2) * 10" } },
    });
    expect(res.body.result.structuredContent.result).toBe(30);
  });

  it("refuses bad input and arguments, another user's VM, and proposes nothing when nothing matches", async () => {
    expect((await post("/mcp/ask", { input: "calculate", approve: "yes" })).status).toBe(400);
    expect((await post("/mcp/ask", { approve: true })).status).toBe(400);
    expect((await post("/mcp/ask", { input: "search files", vmId: "box", approve: true, toolInput: { pattern: 5 } })).status).toBe(400);
    const foreign = await post(
      "/mcp/ask",
      { input: "search the workspace files", vmId: "box", approve: true, toolInput: { pattern: "x" } },
      other,
    );
    expect(foreign.status).toBe(503);
    expect(vmCalls).toEqual([]);
    expect((await post("/mcp/ask", { input: "xylophone quokka", approve: true })).body).toEqual({
      proposed: null,
      executed: false,
      reason: "No tool matches the request",
    });
  });
});

/** Model-assisted planning against an OpenAI-compatible provider mocked with msw. */
describe("plans from a planner model", () => {
  const BASE = "http://planner.routing.test/v1";
  const upstream = createToolCallingUpstream(BASE);
  const msw = mockUpstreams(...upstream.handlers);
  let modelServer: TestServer;
  let user: string;

  beforeAll(async () => {
    await msw.listen();
    modelServer = await startTestServer({
      MODELS_JSON: JSON.stringify({
        models: {
          "echo-1": { provider: "echo" },
          planner: { provider: "openai-compatible", baseURL: msw.url(BASE), upstreamModel: "planner-up" },
        },
      }),
    });
    user = (await registerUser(modelServer)).token;
  });
  afterAll(async () => {
    await msw.close();
    expect(modelServer.loggedErrors()).toEqual([]);
    await modelServer.close();
  });
  beforeEach(() => upstream.reset());

  const plan = (input: string) => modelServer.request("/gateway/v1/mcp/plan", { method: "POST", headers: bearer(user), json: { input } });

  it("uses the model's JSON steps when they name catalog tools with valid args", async () => {
    upstream.script("planner-up", () => ({
      text:
        "```json\n" +
        JSON.stringify({
          steps: [
            { tool: "current_time", args: { timezone: "Asia/Tokyo" }, reason: "time first" },
            { tool: "calculator", args: { expression: "60*24" }, reason: "minutes per day" },
          ],
        }) +
        "\n```",
    }));
    const res = await plan("what time is it in Tokyo, and how many minutes are in a day?");
    expect(res.status).toBe(201);
    expect(res.body.planner).toEqual({ kind: "model", model: "planner" });
    expect(res.body.steps.map((step: any) => [step.server, step.tool, step.args, step.reason])).toEqual([
      ["builtin", "current_time", { timezone: "Asia/Tokyo" }, "time first"],
      ["builtin", "calculator", { expression: "60*24" }, "minutes per day"],
    ]);
    // The planner prompt offered catalog tools with their schemas, and asked for no streaming.
    expect(upstream.calls).toHaveLength(1);
    const request = upstream.calls[0]!;
    expect(request.stream).toBe(false);
    expect(request.messages[0].content).toContain('"name":"current_time"');
    expect(request.messages[0].content).toContain('"inputSchema"');
    expect(request.messages[1]).toEqual({ role: "user", content: "what time is it in Tokyo, and how many minutes are in a day?" });

    const run = await modelServer.request("/gateway/v1/mcp/execute", {
      method: "POST",
      headers: bearer(user),
      json: { planId: res.body.id },
    });
    expect(run.body.status).toBe("completed");
    expect(run.body.steps[1].result.structuredContent.result).toBe(1440);
  });

  it.each([
    ["an unknown tool", { steps: [{ tool: "rm_rf", args: {} }] }, /rm_rf is not one of the offered tools/],
    ["invalid args", { steps: [{ tool: "calculator", args: { expr: "1+1" } }] }, /invalid arguments for calculator/],
    ["no steps", { steps: [] }, /no steps/],
    ["a wrong shape", { plan: ["calculator"] }, /not \{steps/],
    ["prose", "I would use the calculator.", /no JSON object/],
  ])("falls back to the ranking when the model answers %s", async (_label, answer, why) => {
    upstream.script("planner-up", () => ({ text: typeof answer === "string" ? answer : JSON.stringify(answer) }));
    const res = await plan("compute 7 * 6");
    expect(res.status).toBe(201);
    expect(res.body.planner.kind).toBe("ranking");
    expect(res.body.planner.fallback).toMatch(why);
    expect(res.body.steps).toMatchObject([{ tool: "calculator", args: { expression: "7 * 6" } }]);
    expect(upstream.calls).toHaveLength(1);
  });

  it("falls back to the ranking when the model call fails", async () => {
    // No script: the mocked provider answers 404.
    const res = await plan("compute 7 * 6");
    expect(res.status).toBe(201);
    expect(res.body.planner).toMatchObject({ kind: "ranking", fallback: expect.stringMatching(/model planner failed/) });
    expect(res.body.steps[0].tool).toBe("calculator");
  });
});
