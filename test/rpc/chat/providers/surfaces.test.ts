import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createAnthropicUpstream } from "../../../../mocks/anthropic-upstream.js";
import { mockUpstreams } from "../../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../../helpers/server.js";
import { loopbackFetch, sseData, userMessage } from "../../../helpers/chat.js";

/**
 * Native adapters behind the surfaces over real HTTP: a provider's error relayed, a cut stream
 * ended, and an agent running its tool calls on the anthropic adapter (docs/providers.md). The
 * shapes every adapter gives the official client (JSON, stream, usage, tool calls) are in
 * test/rpc/chat/providers-e2e.test.ts.
 */

const ANTHROPIC = "https://api.anthropic.test";
const anthropic = createAnthropicUpstream(ANTHROPIC);
const msw = mockUpstreams(...anthropic.handlers);

let server: TestServer;
let token: string;
let gatewayKey: string;

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("E2E_ANTHROPIC_KEY", "sk-ant-e2e");
  const models = {
    "via-anthropic": {
      provider: "anthropic",
      baseURL: msw.url(ANTHROPIC),
      apiKeyEnv: "E2E_ANTHROPIC_KEY",
      upstreamModel: "claude-haiku-4-5",
      maxOutputTokens: 256,
    },
  };
  server = await startTestServer({ MODELS_JSON: JSON.stringify({ models }) });
  token = (await registerUser(server)).token;
  const gateway = await server.request("/gateway/v1/auth/keys", {
    method: "POST",
    headers: bearer(token),
    json: { name: "ci", description: "providers" },
  });
  expect(gateway.status).toBe(201);
  gatewayKey = gateway.body.key;
});
afterAll(async () => {
  await msw.close();
  vi.unstubAllEnvs();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});
beforeEach(() => anthropic.reset());

describe("errors of a native adapter behind the Gateway API", () => {
  it("relays a provider's 4xx verbatim and ends a cut stream with an error frame and no [DONE]", async () => {
    const body = { type: "error", error: { type: "invalid_request_error", message: "messages: text content blocks must be non-empty" } };
    anthropic.script("claude-haiku-4-5", { kind: "error", status: 400, body });
    const refused = await server.request("/gateway/v1/chat/completions", {
      method: "POST",
      headers: bearer(gatewayKey),
      json: { model: "via-anthropic", messages: userMessage("x") },
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual(body);

    anthropic.script("claude-haiku-4-5", { kind: "cut", turn: { text: "cut right here please" }, after: 5 });
    const res = await loopbackFetch(server.url("/gateway/v1/chat/completions"), {
      method: "POST",
      headers: { ...bearer(gatewayKey), "content-type": "application/json" },
      body: JSON.stringify({ model: "via-anthropic", messages: userMessage("x"), stream: true }),
    });
    expect(res.status).toBe(200);
    const frames = sseData(await res.text());
    expect(frames).not.toContain("[DONE]");
    expect(JSON.parse(frames.at(-1)!)).toHaveProperty("error");
    expect(
      frames
        .slice(0, -1)
        .map((frame) => JSON.parse(frame).choices[0]?.delta.content ?? "")
        .join(""),
    ).toBe("cut right");
  });
});

describe("an agent on the anthropic adapter", () => {
  it("runs a tool call through tool_use and tool_result blocks and answers", async () => {
    anthropic.script("claude-haiku-4-5", (body, turn) => {
      if (turn === 0)
        return {
          kind: "turn",
          turn: { text: "Let me compute.", toolCalls: [{ id: "toolu_calc", name: "calculator", input: { expression: "6*7" } }] },
        };
      const result = body.messages.at(-1).content.find((block: any) => block.type === "tool_result");
      return { kind: "turn", turn: { text: `The answer is ${result.content}` } };
    });
    const created = await server.request("/gateway/v1/agents", {
      method: "POST",
      headers: bearer(token),
      json: {
        name: "claude-agent",
        description: "",
        model: "via-anthropic",
        tools: ["calculator"],
        config: { systemPrompt: "Use tools." },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const run = await server.request(`/gateway/v1/agents/${created.body.id}/invoke`, {
      method: "POST",
      headers: bearer(token),
      json: { input: "What is 6*7?" },
    });
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    expect(run.body).toMatchObject({ status: "completed", output: expect.stringContaining("The answer is 42") });
    expect(run.body.steps).toEqual([expect.objectContaining({ tool: "calculator", arguments: { expression: "6*7" }, error: null })]);

    const [first, second] = anthropic.calls.map((call) => call.body);
    expect(first).toMatchObject({
      model: "claude-haiku-4-5",
      stream: true,
      system: "Use tools.",
      max_tokens: 256,
      messages: [{ role: "user", content: [{ type: "text", text: "What is 6*7?" }] }],
    });
    expect(first.tools.map((tool: any) => tool.name)).toEqual(["calculator"]);
    expect(first.tools[0].input_schema).toMatchObject({ type: "object", required: ["expression"] });
    expect(second.messages.slice(1)).toEqual([
      {
        role: "assistant",
        content: [
          { type: "text", text: "Let me compute." },
          { type: "tool_use", id: "toolu_calc", name: "calculator", input: { expression: "6*7" } },
        ],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_calc", content: expect.stringContaining("42") }] },
    ]);
  });
});
