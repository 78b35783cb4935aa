import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createAnthropicUpstream } from "../../../../mocks/anthropic-upstream.js";
import { createBedrockUpstream } from "../../../../mocks/bedrock-upstream.js";
import { createGeminiUpstream } from "../../../../mocks/gemini-upstream.js";
import { createOpenAiUpstream } from "../../../../mocks/openai-upstream.js";
import { mockUpstreams } from "../../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../../helpers/server.js";
import { loopbackFetch, openaiClient, sseData, userMessage } from "../../../helpers/chat.js";

/**
 * End to end over real HTTP: the official `openai` client on the Gateway and Account surfaces
 * gets the same shapes (JSON, stream, usage) from a model backed by each adapter, and an agent
 * runs its tool calls on the anthropic one (docs/providers.md).
 */

const ANTHROPIC = "https://api.anthropic.test";
const GEMINI = "https://generativelanguage.test/v1beta";
const BEDROCK = "https://bedrock-runtime.us-west-2.amazonaws.com";
const AZURE = "https://res.openai.azure.test";
const anthropic = createAnthropicUpstream(ANTHROPIC);
const gemini = createGeminiUpstream(GEMINI);
const bedrock = createBedrockUpstream(BEDROCK);
const azure = createOpenAiUpstream(`${AZURE}/openai/deployments/gpt4o`);
const msw = mockUpstreams(...anthropic.handlers, ...gemini.handlers, ...bedrock.handlers, ...azure.handlers);

const models = () => ({
  models: {
    "via-anthropic": { provider: "anthropic", baseURL: msw.url(ANTHROPIC), apiKeyEnv: "E2E_ANTHROPIC_KEY", upstreamModel: "claude-haiku-4-5", maxOutputTokens: 256 },
    "via-gemini": { provider: "gemini", baseURL: msw.url(GEMINI), apiKeyEnv: "E2E_GEMINI_KEY", upstreamModel: "gemini-2.5-flash" },
    "via-bedrock": { provider: "bedrock", region: "us-west-2", baseURL: msw.url(BEDROCK), upstreamModel: "amazon.nova-lite-v1:0" },
    "via-azure": { provider: "azure-openai", baseURL: msw.url(AZURE), apiKeyEnv: "E2E_AZURE_KEY", upstreamModel: "gpt4o", apiVersion: "2024-10-21" },
  },
});
const IDS = ["via-anthropic", "via-gemini", "via-bedrock", "via-azure"] as const;

let server: TestServer;
let token: string;
let gatewayKey: string;
let accountKey: string;

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("E2E_ANTHROPIC_KEY", "sk-ant-e2e");
  vi.stubEnv("E2E_GEMINI_KEY", "gemini-e2e");
  vi.stubEnv("E2E_AZURE_KEY", "azure-e2e");
  vi.stubEnv("AWS_ACCESS_KEY_ID", "AKIDE2E");
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", "secret-e2e");
  server = await startTestServer({ MODELS_JSON: JSON.stringify(models()) });
  token = (await registerUser(server)).token;
  const gateway = await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(token), json: { name: "ci", description: "providers" } });
  expect(gateway.status).toBe(201);
  gatewayKey = gateway.body.key;
  const account = await server.request("/account/v1/keys", { method: "POST", headers: bearer(token), json: { name: "laptop" } });
  expect(account.status).toBe(201);
  accountKey = account.body.key;
});
afterAll(async () => {
  await msw.close();
  vi.unstubAllEnvs();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});
beforeEach(() => {
  anthropic.reset();
  gemini.reset();
  bedrock.reset();
  azure.reset();
});

/** What each provider received, for the last call. */
function lastCall(id: (typeof IDS)[number]) {
  if (id === "via-anthropic") return { headers: anthropic.calls.at(-1)!.headers, auth: anthropic.calls.at(-1)!.headers.get("x-api-key") };
  if (id === "via-gemini") return { headers: gemini.calls.at(-1)!.headers, auth: gemini.calls.at(-1)!.headers.get("x-goog-api-key") };
  if (id === "via-bedrock") return { headers: bedrock.calls.at(-1)!.headers, auth: bedrock.calls.at(-1)!.headers.get("authorization")?.split(" ")[0] };
  return { headers: azure.calls.at(-1)!.headers, auth: azure.calls.at(-1)!.headers.get("api-key") };
}
const expectedAuth = { "via-anthropic": "sk-ant-e2e", "via-gemini": "gemini-e2e", "via-bedrock": "AWS4-HMAC-SHA256", "via-azure": "azure-e2e" };

describe("every adapter behind the Gateway and Account surfaces", () => {
  for (const [surface, base, credential] of [
    ["Gateway", "/gateway/v1", () => gatewayKey],
    ["Account", "/account/v1", () => accountKey],
  ] as const) {
    for (const id of IDS) {
      it(`${surface}: ${id} answers JSON and streams with usage through the official client`, async () => {
        const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        const client = openaiClient(server, base, credential(), { defaultHeaders: { traceparent } });
        const completion = await client.chat.completions.create({ model: id, messages: userMessage("three little words") });
        expect(completion).toMatchObject({
          object: "chat.completion",
          model: id,
          choices: [{ index: 0, message: { role: "assistant", content: "three little words" }, finish_reason: "stop" }],
          // The mocks report 10 prompt tokens and one per word.
          usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 },
        });
        expect(lastCall(id).auth).toBe(expectedAuth[id]);

        const stream = await client.chat.completions.create({ model: id, messages: userMessage("streamed four words"), stream: true, stream_options: { include_usage: true } });
        const chunks = [];
        for await (const chunk of stream) chunks.push(chunk);
        expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.model === id)).toBe(true);
        expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe("streamed four words");
        expect(chunks.find((chunk) => chunk.choices[0]?.delta.role)?.choices[0]?.delta.role).toBe("assistant");
        expect(chunks.flatMap((chunk) => chunk.choices.map((choice) => choice.finish_reason)).filter(Boolean)).toEqual(["stop"]);
        expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 } });
        expect(lastCall(id).auth).toBe(expectedAuth[id]);
        // The caller's trace continues at the provider.
        expect(lastCall(id).headers.get("traceparent")).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
      });
    }
  }

  it("drops the usage frame for a client that did not ask for it, as for any provider", async () => {
    const client = openaiClient(server, "/gateway/v1", gatewayKey);
    const stream = await client.chat.completions.create({ model: "via-bedrock", messages: userMessage("no usage please"), stream: true });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe("no usage please");
    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
  });

  it("relays a provider's 4xx verbatim and ends a cut stream with an error frame and no [DONE]", async () => {
    const body = { type: "error", error: { type: "invalid_request_error", message: "messages: text content blocks must be non-empty" } };
    anthropic.script("claude-haiku-4-5", { kind: "error", status: 400, body });
    const refused = await server.request("/gateway/v1/chat/completions", { method: "POST", headers: bearer(gatewayKey), json: { model: "via-anthropic", messages: userMessage("x") } });
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
    expect(frames.slice(0, -1).map((frame) => JSON.parse(frame).choices[0]?.delta.content ?? "").join("")).toBe("cut right");
  });
});

describe("an agent on the anthropic adapter", () => {
  it("runs a tool call through tool_use and tool_result blocks and answers", async () => {
    anthropic.script("claude-haiku-4-5", (body, turn) => {
      if (turn === 0) return { kind: "turn", turn: { text: "Let me compute.", toolCalls: [{ id: "toolu_calc", name: "calculator", input: { expression: "6*7" } }] } };
      const result = body.messages.at(-1).content.find((block: any) => block.type === "tool_result");
      return { kind: "turn", turn: { text: `The answer is ${result.content}` } };
    });
    const created = await server.request("/gateway/v1/agents", { method: "POST", headers: bearer(token), json: { name: "claude-agent", description: "", model: "via-anthropic", tools: ["calculator"], config: { systemPrompt: "Use tools." } } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const run = await server.request(`/gateway/v1/agents/${created.body.id}/invoke`, { method: "POST", headers: bearer(token), json: { input: "What is 6*7?" } });
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    expect(run.body).toMatchObject({ status: "completed", output: expect.stringContaining("The answer is 42") });
    expect(run.body.steps).toEqual([expect.objectContaining({ tool: "calculator", arguments: { expression: "6*7" }, error: null })]);

    const [first, second] = anthropic.calls.map((call) => call.body);
    expect(first).toMatchObject({ model: "claude-haiku-4-5", stream: true, system: "Use tools.", max_tokens: 256, messages: [{ role: "user", content: [{ type: "text", text: "What is 6*7?" }] }] });
    expect(first.tools.map((tool: any) => tool.name)).toEqual(["calculator"]);
    expect(first.tools[0].input_schema).toMatchObject({ type: "object", required: ["expression"] });
    expect(second.messages.slice(1)).toEqual([
      { role: "assistant", content: [{ type: "text", text: "Let me compute." }, { type: "tool_use", id: "toolu_calc", name: "calculator", input: { expression: "6*7" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_calc", content: expect.stringContaining("42") }] },
    ]);
  });
});
