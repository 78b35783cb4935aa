import { readFileSync } from "node:fs";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createAnthropicUpstream } from "../../../mocks/anthropic-upstream.js";
import { createBedrockUpstream } from "../../../mocks/bedrock-upstream.js";
import { createGeminiUpstream } from "../../../mocks/gemini-upstream.js";
import { createOpenAiChatUpstream } from "../../../mocks/openai-chat-upstream.js";
import { createOpenAiResponsesUpstream } from "../../../mocks/openai-responses-upstream.js";
import type { RecordedCall, ScriptedProvider } from "../../../mocks/scripted-provider.js";
import { MATRIX, TARGETS, matrixMarkdown, type MatrixField, type Target } from "../../../rpc/chat/translate/matrix.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * docs/dialects.md "The matrix", cell by cell: for every field of the canonical request and
 * every kind of upstream, a chat completions request on the Gateway API carrying the field (a
 * Messages request for `top_k`, which only that dialect has) reaches the provider's mock as the
 * cell says — forwarded under its name, translated to the provider's own field, dropped with an
 * `X-Service-Warning` naming it, or refused with a 400 naming it before anything is sent — and
 * the page shows the table the adapters read.
 */

const OPENAI = "https://api.openai.test/v1";
const RESPONSES = "https://api.responses.test/v1";
const ANTHROPIC = "https://api.anthropic.test";
const GEMINI = "https://generativelanguage.test/v1beta";
const BEDROCK = "https://bedrock-runtime.us-east-1.amazonaws.com";

const openai = createOpenAiChatUpstream(OPENAI);
const responses = createOpenAiResponsesUpstream(RESPONSES);
const anthropic = createAnthropicUpstream(ANTHROPIC);
const gemini = createGeminiUpstream(GEMINI);
const bedrock = createBedrockUpstream(BEDROCK);
const msw = mockUpstreams(...openai.handlers, ...responses.handlers, ...anthropic.handlers, ...gemini.handlers, ...bedrock.handlers);

const MOCKS: Readonly<Record<Exclude<Target, "echo">, ScriptedProvider>> = { chat: openai, responses, anthropic, gemini, bedrock };

/** The model of each kind of upstream. */
const MODEL: Readonly<Record<Target, string>> = {
  chat: "m-chat",
  responses: "m-responses",
  anthropic: "m-anthropic",
  gemini: "m-gemini",
  bedrock: "m-bedrock",
  echo: "m-echo",
};

const TOOLS = [{ type: "function", function: { name: "lookup", description: "Looks up", parameters: { type: "object", properties: {} } } }];
const SCHEMA = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"], additionalProperties: false };

/** The value each field is sent with (one that asks for something, so refusals apply). */
const VALUES: Readonly<Record<MatrixField, unknown>> = {
  temperature: 0.5,
  top_p: 0.9,
  max_tokens: 50,
  stop: ["STOP"],
  seed: 7,
  n: 2,
  logprobs: true,
  top_logprobs: 2,
  presence_penalty: 0.5,
  frequency_penalty: 0.25,
  top_k: 5,
  user: "end-user-1",
  metadata: { team: "blue" },
  parallel_tool_calls: false,
  reasoning_effort: "low",
  response_format: { type: "json_schema", json_schema: { name: "reply", schema: SCHEMA, strict: true } },
};

/** Where a translated (or forwarded) field is in each provider's body, and what it holds there. */
const AT: Partial<Record<Target, Partial<Record<MatrixField, [path: string, value: unknown]>>>> = {
  chat: {},
  responses: {
    temperature: ["temperature", 0.5],
    top_p: ["top_p", 0.9],
    max_tokens: ["max_output_tokens", 50],
    user: ["safety_identifier", "end-user-1"],
    metadata: ["metadata", { team: "blue" }],
    parallel_tool_calls: ["parallel_tool_calls", false],
    reasoning_effort: ["reasoning", { effort: "low", summary: "auto" }],
    response_format: ["text.format", { type: "json_schema", name: "reply", schema: SCHEMA, strict: true }],
  },
  anthropic: {
    temperature: ["temperature", 0.5],
    top_p: ["top_p", 0.9],
    max_tokens: ["max_tokens", 50],
    stop: ["stop_sequences", ["STOP"]],
    top_k: ["top_k", 5],
    user: ["metadata.user_id", "end-user-1"],
    parallel_tool_calls: ["tool_choice.disable_parallel_tool_use", true],
    reasoning_effort: ["thinking", { type: "enabled", budget_tokens: 2048 }],
    response_format: ["output_config.format", { type: "json_schema", schema: SCHEMA }],
  },
  gemini: {
    temperature: ["generationConfig.temperature", 0.5],
    top_p: ["generationConfig.topP", 0.9],
    max_tokens: ["generationConfig.maxOutputTokens", 50],
    stop: ["generationConfig.stopSequences", ["STOP"]],
    seed: ["generationConfig.seed", 7],
    presence_penalty: ["generationConfig.presencePenalty", 0.5],
    frequency_penalty: ["generationConfig.frequencyPenalty", 0.25],
    top_k: ["generationConfig.topK", 5],
    reasoning_effort: ["generationConfig.thinkingConfig.thinkingBudget", 2048],
    response_format: ["generationConfig.responseJsonSchema", SCHEMA],
  },
  bedrock: {
    temperature: ["inferenceConfig.temperature", 0.5],
    top_p: ["inferenceConfig.topP", 0.9],
    max_tokens: ["inferenceConfig.maxTokens", 50],
    stop: ["inferenceConfig.stopSequences", ["STOP"]],
    user: ["requestMetadata.user", "end-user-1"],
    metadata: ["requestMetadata", { team: "blue" }],
    reasoning_effort: ["additionalModelRequestFields.thinking", { type: "enabled", budget_tokens: 2048 }],
    response_format: ["outputConfig.textFormat.type", "json_schema"],
  },
};

function at(body: unknown, path: string): unknown {
  let value = body;
  for (const part of path.split(".")) value = (value as Record<string, unknown> | undefined)?.[part];
  return value;
}

let server: TestServer;
let token: string;

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("MATRIX_KEY", "sk-matrix");
  vi.stubEnv("AWS_ACCESS_KEY_ID", "AKIDMATRIX");
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", "secret-matrix");
  vi.stubEnv("AWS_SESSION_TOKEN", "");
  const models = {
    "m-chat": { provider: "openai-compatible", baseURL: msw.url(OPENAI), apiKeyEnv: "MATRIX_KEY" },
    "m-responses": { provider: "openai-compatible", baseURL: msw.url(RESPONSES), apiKeyEnv: "MATRIX_KEY", apis: ["responses"] },
    "m-anthropic": { provider: "anthropic", baseURL: msw.url(ANTHROPIC), apiKeyEnv: "MATRIX_KEY" },
    "m-gemini": { provider: "gemini", baseURL: msw.url(GEMINI), apiKeyEnv: "MATRIX_KEY" },
    "m-bedrock": { provider: "bedrock", baseURL: msw.url(BEDROCK), region: "us-east-1", upstreamModel: "anthropic.claude-sonnet-4" },
    "m-echo": { provider: "echo" },
  };
  server = await startTestServer({ MODELS_JSON: JSON.stringify({ models }) });
  token = (await registerUser(server)).token;
});

afterAll(async () => {
  await msw.close();
  vi.unstubAllEnvs();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

beforeEach(() => {
  for (const mock of Object.values(MOCKS)) mock.reset();
});

/** One request carrying `field`: chat completions, or Messages for `top_k`. */
async function send(target: Target, field: MatrixField) {
  const value = VALUES[field];
  const tools = field === "parallel_tool_calls" ? { tools: TOOLS } : {};
  if (field === "top_k")
    return server.request("/gateway/v1/messages", {
      method: "POST",
      headers: bearer(token),
      json: { model: MODEL[target], max_tokens: 64, messages: [{ role: "user", content: "hello" }], top_k: value },
    });
  return server.request("/gateway/v1/chat/completions", {
    method: "POST",
    headers: bearer(token),
    json: { model: MODEL[target], messages: [{ role: "user", content: "hello" }], ...tools, [field]: value },
  });
}

describe("docs/dialects.md shows the matrix the adapters read", () => {
  it("the table between its markers is the rendered MATRIX", () => {
    const page = readFileSync("docs/dialects.md", "utf8");
    const table = /<!-- matrix:start -->\n([\s\S]*?)\n<!-- matrix:end -->/.exec(page)?.[1];
    expect(table).toBe(matrixMarkdown());
  });
});

describe.each(TARGETS.map((target) => [target]))("every field of the matrix on a %s upstream", (target) => {
  it.each((Object.keys(MATRIX) as MatrixField[]).map((field) => [field, MATRIX[field][target].how]))("%s is %s", async (field, how) => {
    const res = await send(target, field);
    const mock = target === "echo" ? undefined : MOCKS[target];
    const call: RecordedCall | undefined = mock?.calls.at(-1);
    const warning = res.headers.get("x-service-warning") ?? "";
    switch (how) {
      case "refused":
        expect(res.status, JSON.stringify(res.body)).toBe(400);
        expect(JSON.stringify(res.body)).toContain(field);
        expect(mock?.calls ?? []).toHaveLength(0);
        return;
      case "dropped": {
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(warning).toContain(`${field} dropped`);
        const body = call!.body;
        expect(body[field], `${field} reached the ${target} upstream`).toBeUndefined();
        return;
      }
      case "forwarded":
      case "translated": {
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(warning).not.toContain(field);
        const [path, value] = AT[target]?.[field] ?? [field, VALUES[field]];
        expect(at(call!.body, path), `${field} at ${path}`).toEqual(value);
        return;
      }
      default:
        // honoured, no effect: the echo model answers.
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(warning).not.toContain(field);
    }
  });
});

describe("what the echo model honours", () => {
  it("stop, max_tokens, reasoning and a JSON schema", async () => {
    const ask = (fields: Record<string, unknown>, content = "one two STOP three four") =>
      server.request("/gateway/v1/chat/completions", {
        method: "POST",
        headers: bearer(token),
        json: { model: "m-echo", messages: [{ role: "user", content }], ...fields },
      });
    expect((await ask({ stop: "STOP" })).body.choices[0].message.content).toBe("one two");
    const cut = (await ask({ max_tokens: 2 })).body.choices[0];
    expect(cut).toMatchObject({ finish_reason: "length", message: { content: "one two" } });
    const reasoned = (await ask({ reasoning_effort: "high" })).body;
    expect(reasoned.choices[0].message.reasoning_content).toEqual(expect.any(String));
    expect(reasoned.usage.completion_tokens_details.reasoning_tokens).toBeGreaterThan(0);
    const json = (await ask({ response_format: VALUES.response_format }, "the answer")).body.choices[0].message.content;
    expect(JSON.parse(json)).toEqual({ answer: "the answer" });
    const object = (await ask({ response_format: { type: "json_object" } }, "anything")).body.choices[0].message.content;
    expect(JSON.parse(object)).toEqual({ text: "anything" });
  });
});
