import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAnthropicUpstream } from "../../../mocks/anthropic-upstream.js";
import { createBedrockUpstream } from "../../../mocks/bedrock-upstream.js";
import { createGeminiUpstream } from "../../../mocks/gemini-upstream.js";
import { createOpenAiChatUpstream } from "../../../mocks/openai-chat-upstream.js";
import { createOpenAiResponsesUpstream } from "../../../mocks/openai-responses-upstream.js";
import type { ScriptedProvider } from "../../../mocks/scripted-provider.js";
import { limitConcurrency, runScenarios, type ScenarioReport } from "../../helpers/clients.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * Structured output with the newest real SDKs (test/clients/, docs/clients.md) through every
 * provider adapter (docs/dialects.md "Structured output"): `chat.completions.parse` and
 * `responses.parse` with a zod schema (openai), `messages.parse` (Anthropic SDK), the AI SDK's
 * `generateObject` and `Output.object` on `openai(id)`, `openai.chat(id)`, `@ai-sdk/anthropic` and
 * `@ai-sdk/openai-compatible`, LangChain's `withStructuredOutput` (ChatOpenAI on chat completions
 * and on the Responses API, ChatAnthropic) and the Agents SDK's `outputType` (chat completions and
 * Responses) each return a parsed object, every model of every provider answering, each provider
 * mocked in its own wire format and asked in its own native field.
 */

const OPENAI = "https://api.openai.test/v1";
const AZURE = "https://sdk-resource.openai.azure.test";
const RESPONSES = "https://api.responses.test/v1";
const ANTHROPIC = "https://api.anthropic.test";
const GEMINI = "https://generativelanguage.test/v1beta";
const BEDROCK = "https://bedrock-runtime.us-east-1.amazonaws.com";

const openai = createOpenAiChatUpstream(OPENAI);
const azure = createOpenAiChatUpstream(`${AZURE}/openai/deployments/gpt-sdk`, { azure: true });
const responses = createOpenAiResponsesUpstream(RESPONSES);
const anthropic = createAnthropicUpstream(ANTHROPIC);
const gemini = createGeminiUpstream(GEMINI);
const bedrock = createBedrockUpstream(BEDROCK);
const msw = mockUpstreams(
  ...openai.handlers,
  ...azure.handlers,
  ...responses.handlers,
  ...anthropic.handlers,
  ...gemini.handlers,
  ...bedrock.handlers,
);

const MODELS: Record<string, Record<string, unknown>> = {
  "echo-1": { provider: "echo" },
  "m-chat": { provider: "openai-compatible", baseURL: OPENAI, apiKeyEnv: "SDK_KEY" },
  "m-azure": { provider: "azure-openai", baseURL: AZURE, apiKeyEnv: "SDK_KEY", upstreamModel: "gpt-sdk" },
  "m-responses": { provider: "openai-compatible", baseURL: RESPONSES, apiKeyEnv: "SDK_KEY", apis: ["responses"] },
  "m-anthropic": { provider: "anthropic", baseURL: ANTHROPIC, apiKeyEnv: "SDK_KEY" },
  "m-gemini": { provider: "gemini", baseURL: GEMINI, apiKeyEnv: "SDK_KEY" },
  "m-bedrock": { provider: "bedrock", baseURL: BEDROCK, region: "us-east-1", upstreamModel: "anthropic.claude-sonnet-4" },
};

/** The structured-output scenarios of each scenario script (test/clients/scenarios/). */
const SCENARIOS: Record<string, string[]> = {
  openai: ["chat-parse", "responses-parse"],
  anthropic: ["messages-parse"],
  "ai-sdk": ["responses-object", "chat-object", "anthropic-object", "compatible-object", "responses-output", "chat-output"],
  langchain: ["openai-structured", "responses-structured", "anthropic-structured"],
  agents: ["chat-output", "responses-output"],
};

/** Where each scenario's parsed object is in its result. */
const parsedOf = (value: Record<string, unknown>) => value.parsed ?? value.object ?? value.finalOutput;

let server: TestServer;
let key: string;
const reports: Record<string, Promise<ScenarioReport>> = {};

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("SDK_KEY", "sk-sdk");
  vi.stubEnv("AWS_ACCESS_KEY_ID", "AKIDSDK");
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", "secret-sdk");
  vi.stubEnv("AWS_SESSION_TOKEN", "");
  const models = Object.fromEntries(
    Object.entries(MODELS).map(([id, entry]) => [
      id,
      { ...entry, ...(typeof entry.baseURL === "string" ? { baseURL: msw.url(entry.baseURL) } : {}) },
    ]),
  );
  server = await startTestServer({ MODELS_JSON: JSON.stringify({ models }) });
  const user = await registerUser(server);
  key = (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(user.token), json: { name: "sdks" } })).body.key;
  // Each script once, every model in one process; two at a time on two cores.
  const slot = limitConcurrency(2);
  for (const [script, only] of Object.entries(SCENARIOS))
    reports[script] = slot(() =>
      runScenarios(
        script,
        { baseURL: server.url("/gateway"), apiKey: key, model: "echo-1", models: Object.keys(MODELS), only },
        { timeoutMs: 120_000 },
      ),
    );
  await Promise.allSettled(Object.values(reports));
}, 180_000);

afterAll(async () => {
  await msw.close();
  vi.unstubAllEnvs();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

describe.each(Object.entries(SCENARIOS))("%s: structured output through every provider adapter", (script, scenarios) => {
  it.each(Object.keys(MODELS).flatMap((model) => scenarios.map((scenario) => [`${model}/${scenario}`])))(
    "%s returns a parsed object",
    async (name) => {
      const outcome = (await reports[script]!).results[name];
      expect(outcome, name).toBeDefined();
      if (!outcome!.ok) throw new Error(`${name}: ${JSON.stringify(outcome!.error)}`);
      const parsed = parsedOf(outcome!.value) as Record<string, unknown>;
      expect(parsed).toEqual({
        city: expect.any(String),
        temperature: expect.any(Number),
        conditions: expect.stringMatching(/^(sunny|cloudy|rain)$/),
      });
    },
  );
});

describe("each provider was asked in its own native structured-output field", () => {
  const asked = (mock: ScriptedProvider, has: (body: any) => boolean) => mock.calls.some((call) => has(call.body));
  it("chat response_format, Responses text.format, Anthropic output_config.format, Gemini responseJsonSchema, Bedrock outputConfig.textFormat", () => {
    expect(asked(openai, (body) => body.response_format?.type === "json_schema")).toBe(true);
    expect(asked(azure, (body) => body.response_format?.type === "json_schema")).toBe(true);
    expect(asked(responses, (body) => body.text?.format?.type === "json_schema")).toBe(true);
    expect(asked(anthropic, (body) => body.output_config?.format?.type === "json_schema")).toBe(true);
    expect(asked(gemini, (body) => body.generationConfig?.responseMimeType === "application/json")).toBe(true);
    expect(asked(bedrock, (body) => body.outputConfig?.textFormat?.type === "json_schema")).toBe(true);
    // JSON mode without a schema (the openai-compatible AI SDK provider): a forced tool on Anthropic and Bedrock.
    expect(asked(anthropic, (body) => body.tool_choice?.name === "structured_output")).toBe(true);
    expect(asked(bedrock, (body) => body.toolConfig?.toolChoice?.tool?.name === "structured_output")).toBe(true);
  });
});
