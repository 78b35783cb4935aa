import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { connectVm, vmSocketUrl, type TestVm } from "../../helpers/vm.js";
import { eventually } from "../../helpers/eventually.js";
import { createToolCallingUpstream, toolReplies } from "../../../mocks/openai-tools.js";

const BASE = "http://models.agents.test/v1";
const upstream = createToolCallingUpstream(BASE);
const msw = mockUpstreams(...upstream.handlers);
const model = (upstreamModel: string) => ({ provider: "openai-compatible", baseURL: msw.url(BASE), upstreamModel });
const modelsJson = () =>
  JSON.stringify({ models: { "tool-model": model("tool-model"), "loop-model": model("loop-model"), "fail-model": model("fail-model") } });

let server: TestServer;
let token: string;
let vm: TestVm;
/** Calls of the VM's `wait` tool, released by the test. */
const waiting: { key: string; release: () => void }[] = [];

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({ MODELS_JSON: modelsJson() });
  token = (await registerUser(server)).token;
  vm = await connectVm(vmSocketUrl(server.origin, "agent-vm", { vmId: "vm-a" }), token, {
    "tools/call": ({ name, arguments: args }) => {
      if (name === "lookup") return { content: [{ type: "text", text: `value-of-${args.key}` }] };
      if (name === "broken") throw new Error("disk on fire");
      if (name === "slow") return new Promise(() => undefined);
      if (name === "wait")
        return new Promise((resolve) =>
          waiting.push({ key: String(args.key), release: () => resolve({ content: [{ type: "text", text: `waited ${args.key}` }] }) }),
        );
      throw new Error(`unexpected tool ${name}`);
    },
  });
  const keyed = { type: "object", properties: { key: { type: "string" } }, required: ["key"] };
  await vm.register([
    { name: "lookup", description: "Looks a key up on the VM", inputSchema: keyed },
    { name: "broken", inputSchema: { type: "object" } },
    { name: "slow", inputSchema: { type: "object" } },
    { name: "wait", inputSchema: keyed },
  ]);
});

afterAll(async () => {
  await vm?.close();
  await msw.close();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

beforeEach(() => upstream.reset());

const auth = () => bearer(token);
async function createAgent(body: Record<string, unknown>) {
  const res = await server.request("/gateway/v1/agents", { method: "POST", headers: auth(), json: { description: "", ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; status: string };
}
const invoke = (id: string, input: string) =>
  server.request(`/gateway/v1/agents/${id}/invoke`, { method: "POST", headers: auth(), json: { input } });
const logs = async (id: string, lines = 50) =>
  (await server.request(`/gateway/v1/agents/${id}/logs?lines=${lines}`, { headers: auth() })).body.logs as any[];

/** Reads an SSE response into its `data:` frames, parsed. */
async function sseFrames(response: Response): Promise<any[]> {
  const text = await response.text();
  return text
    .split("\n\n")
    .map((block) => block.trim())
    .filter((block) => block.startsWith("data: "))
    .map((block) => JSON.parse(block.slice(6)));
}

describe("POST /agents/{id}/invoke", () => {
  it("runs a built-in tool and a VM tool through the model's tool calls and answers with their results", async () => {
    upstream.script("tool-model", (body, turn) => {
      if (turn === 0)
        return {
          toolCalls: [
            { name: "calculator", arguments: { expression: "6*7" } },
            { name: "vm__vm-a__lookup", arguments: { key: "answer" } },
          ],
        };
      const replies = toolReplies(body);
      return {
        text: `calc=${replies.find((r) => r.name === "calculator")?.content} lookup=${replies.find((r) => r.name === "vm__vm-a__lookup")?.content}`,
      };
    });
    const agent = await createAgent({
      name: "helper",
      model: "tool-model",
      tools: ["calculator", "vm__vm-a__lookup"],
      config: { systemPrompt: "Be brief.", temperature: 0.2 },
    });

    const res = await invoke(agent.id, "What is 6*7 and the answer?");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      runId: expect.stringMatching(/^run_/),
      agentId: agent.id,
      status: "completed",
      output: "calc=42 lookup=value-of-answer",
      usage: { prompt_tokens: 20, completion_tokens: 10, total_tokens: 30 },
    });
    expect(res.body.steps).toEqual([
      expect.objectContaining({
        index: 0,
        tool: "calculator",
        arguments: { expression: "6*7" },
        error: null,
        result: expect.objectContaining({ content: [{ type: "text", text: "42" }] }),
      }),
      expect.objectContaining({
        index: 1,
        tool: "vm__vm-a__lookup",
        arguments: { key: "answer" },
        error: null,
        result: { content: [{ type: "text", text: "value-of-answer" }] },
      }),
    ]);
    for (const step of res.body.steps) expect(step.durationMs).toEqual(expect.any(Number));

    // What the provider saw: the tools as functions, the system prompt, then the tool results fed back.
    expect(upstream.calls).toHaveLength(2);
    const [first, second] = upstream.calls;
    expect(first!.tools.map((tool: any) => tool.function.name)).toEqual(["calculator", "vm__vm-a__lookup"]);
    expect(first!.tools[0].function.parameters).toMatchObject({ required: ["expression"] });
    expect(first!).toMatchObject({ model: "tool-model", stream: true, temperature: 0.2 });
    expect(first!.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "What is 6*7 and the answer?" },
    ]);
    expect(second!.messages[2]).toMatchObject({
      role: "assistant",
      tool_calls: [expect.objectContaining({ type: "function" }), expect.anything()],
    });
    expect(toolReplies(second!)).toEqual([
      { name: "calculator", content: "42" },
      { name: "vm__vm-a__lookup", content: "value-of-answer" },
    ]);

    // The agent is idle again, and the run is in its logs, newest last.
    expect((await server.request(`/gateway/v1/agents/${agent.id}`, { headers: auth() })).body.status).toBe("idle");
    const entries = await logs(agent.id);
    expect(entries.map((entry) => entry.event)).toEqual(["agent.created", "invocation.started", "step", "step", "invocation.finished"]);
    expect(entries.at(-1)).toMatchObject({
      runId: res.body.runId,
      level: "info",
      data: { status: "completed", steps: 2, usage: { total_tokens: 30 } },
    });
    expect(entries[2]).toMatchObject({ data: { tool: "calculator", arguments: { expression: "6*7" } } });
    expect((await logs(agent.id, 2)).map((entry) => entry.event)).toEqual(["step", "invocation.finished"]);
  });

  it("streams the run's events over SSE when stream is true", async () => {
    upstream.script("tool-model", (body, turn) =>
      turn === 0
        ? { toolCalls: [{ name: "calculator", arguments: { expression: "2^10" } }] }
        : { text: `It is ${toolReplies(body)[0]!.content}` },
    );
    const agent = await createAgent({ name: "streamer", model: "tool-model", tools: ["calculator"] });
    const response = await fetch(server.url(`/gateway/v1/agents/${agent.id}/invoke`), {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ input: "2^10?", stream: true }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const frames = await sseFrames(response);
    const runId = frames[0].runId;
    expect(runId).toMatch(/^run_/);
    expect(frames.every((frame) => frame.runId === runId)).toBe(true);
    expect(frames[0]).toEqual({ runId, type: "status", status: "running" });
    expect(frames.filter((frame) => frame.type === "step").map((frame) => [frame.step.tool, frame.step.result.content[0].text])).toEqual([
      ["calculator", "1024"],
    ]);
    expect(
      frames
        .filter((frame) => frame.type === "chunk")
        .map((frame) => frame.content)
        .join(""),
    ).toBe("It is 1024");
    expect(frames.at(-1)).toMatchObject({
      type: "done",
      result: { status: "completed", output: "It is 1024", usage: { total_tokens: 30 } },
    });
    expect(frames.filter((frame) => frame.type === "done")).toHaveLength(1);
  });

  it("publishes every event on the bus channel agent-runs:<id>", async () => {
    upstream.script("tool-model", () => ({ text: "hello there" }));
    const agent = await createAgent({ name: "watched", model: "tool-model" });
    const seen: any[] = [];
    const off = await server.composition.ports.store.bus.subscribe(`agent-runs:${agent.id}`, (message) => seen.push(message));
    const res = await invoke(agent.id, "hi");
    await eventually(() => seen.some((message) => message.event.type === "done"));
    await off();
    expect(seen.every((message) => message.runId === res.body.runId)).toBe(true);
    expect(seen.map((message) => message.event.type)).toEqual(["status", "chunk", "chunk", "done"]);
    expect(seen.at(-1).event.result.output).toBe("hello there");
  });

  it("ends with max_steps when the model keeps calling tools, and logs it", async () => {
    upstream.script("loop-model", (_body, turn) => ({ toolCalls: [{ name: "calculator", arguments: { expression: `${turn}+1` } }] }));
    const agent = await createAgent({ name: "looper", model: "loop-model", tools: ["calculator"], config: { maxSteps: 2 } });
    const res = await invoke(agent.id, "count forever");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "max_steps", error: expect.stringContaining("2 rounds"), usage: { total_tokens: 45 } });
    expect(res.body.steps.map((step: any) => step.result.content[0].text)).toEqual(["1", "2"]);
    expect(upstream.calls).toHaveLength(3);
    const finished = (await logs(agent.id)).at(-1);
    expect(finished).toMatchObject({
      event: "invocation.finished",
      level: "error",
      runId: res.body.runId,
      data: { status: "max_steps", steps: 2 },
    });
    expect((await server.request(`/gateway/v1/agents/${agent.id}`, { headers: auth() })).body.status).toBe("idle");
  });

  it("records a failing and a timed-out tool in their steps and shows the model the errors", async () => {
    upstream.script("fail-model", (body, turn) =>
      turn === 0
        ? {
            toolCalls: [
              { name: "vm__vm-a__broken", arguments: {} },
              { name: "vm__vm-a__slow", arguments: {} },
              { name: "calculator", arguments: { nope: 1 } },
            ],
          }
        : { text: `saw ${toolReplies(body).filter((reply) => reply.content.startsWith("Error:")).length} errors` },
    );
    const agent = await createAgent({
      name: "fragile",
      model: "fail-model",
      tools: ["vm__vm-a__broken", "vm__vm-a__slow", "calculator"],
      config: { toolTimeoutSeconds: 0.2 },
    });
    const res = await invoke(agent.id, "try your tools");
    expect(res.body).toMatchObject({ status: "completed", output: "saw 3 errors" });
    const [broken, slow, invalid] = res.body.steps;
    expect(broken).toMatchObject({ tool: "vm__vm-a__broken", result: null, error: expect.stringContaining("disk on fire") });
    expect(slow).toMatchObject({ tool: "vm__vm-a__slow", result: null, error: expect.stringMatching(/time|within/i) });
    expect(slow.durationMs).toBeGreaterThanOrEqual(150);
    expect(invalid).toMatchObject({ tool: "calculator", error: expect.stringContaining("Invalid arguments") });
    const replies = toolReplies(upstream.calls[1]!);
    expect(replies[0]!.content).toContain("disk on fire");
    expect(replies[1]!.content).toBe(`Error: ${slow.error}`);
    const stepLogs = (await logs(agent.id)).filter((entry) => entry.event === "step");
    expect(stepLogs.map((entry) => entry.level)).toEqual(["error", "error", "error"]);
    expect(stepLogs[0].data.error).toContain("disk on fire");
  });

  it("shows running while any invocation is in flight, and idle only when all have finished", async () => {
    upstream.script("tool-model", (body, turn) => {
      const replies = toolReplies(body);
      if (replies.length) return { text: replies[0]!.content };
      const input = body.messages.find((message: any) => message.role === "user").content;
      return turn >= 0 ? { toolCalls: [{ name: "vm__vm-a__wait", arguments: { key: input } }] } : { text: "" };
    });
    const agent = await createAgent({ name: "parallel", model: "tool-model", tools: ["vm__vm-a__wait"] });
    const status = async () => (await server.request(`/gateway/v1/agents/${agent.id}`, { headers: auth() })).body.status;
    const first = invoke(agent.id, "one");
    const second = invoke(agent.id, "two");
    await eventually(() => waiting.length === 2);
    expect(await status()).toBe("running");
    waiting.find((call) => call.key === "one")!.release();
    expect((await first).body).toMatchObject({ status: "completed", output: "waited one" });
    expect(await status()).toBe("running");
    waiting.find((call) => call.key === "two")!.release();
    expect((await second).body).toMatchObject({ status: "completed", output: "waited two" });
    expect(await status()).toBe("idle");
    waiting.length = 0;
  });

  it("cancels the run when the SSE client goes away", async () => {
    upstream.script("tool-model", () => ({ toolCalls: [{ name: "vm__vm-a__slow", arguments: {} }] }));
    const agent = await createAgent({ name: "quitter", model: "tool-model", tools: ["vm__vm-a__slow"] });
    const controller = new AbortController();
    const response = await fetch(server.url(`/gateway/v1/agents/${agent.id}/invoke`), {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ input: "wait forever", stream: true }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"status":"running"');
    await eventually(async () => (await server.request(`/gateway/v1/agents/${agent.id}`, { headers: auth() })).body.status === "running");
    controller.abort();
    const finished = await eventually(async () => (await logs(agent.id)).find((entry) => entry.event === "invocation.finished"));
    expect(finished).toMatchObject({ data: { status: "cancelled" } });
    expect((await server.request(`/gateway/v1/agents/${agent.id}`, { headers: auth() })).body.status).toBe("idle");
  });

  it("refuses an unknown agent with 404 before anything runs", async () => {
    const res = await invoke("agt_doesnotexist", "hi");
    expect(res.status).toBe(404);
    expect(upstream.calls).toHaveLength(0);
    expect((await server.request("/gateway/v1/agents/agt_doesnotexist/logs", { headers: auth() })).status).toBe(404);
  });
});
