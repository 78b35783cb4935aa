import { createHash, randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type OpenAI from "openai";
import type { HttpHandler } from "msw";
import { createAnthropicUpstream } from "../../../mocks/anthropic-upstream.js";
import { createBedrockUpstream } from "../../../mocks/bedrock-upstream.js";
import { createGeminiUpstream } from "../../../mocks/gemini-upstream.js";
import { createOpenAiChatUpstream } from "../../../mocks/openai-chat-upstream.js";
import type { MockBehaviour, MockUsage, RecordedCall, ScriptedProvider } from "../../../mocks/scripted-provider.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { loopbackFetch, openaiClient, platformAccount, sseData } from "../../helpers/chat.js";

/**
 * End to end over real HTTP (docs/providers.md): the official `openai` client on the Gateway
 * and Account surfaces gets the same shapes — JSON, stream, usage, tool calls — from a model
 * on each adapter, each provider mocked in its own documented wire format. Every test also
 * checks what the provider received (path, headers, body in its native form), that the usage
 * is the provider's own mapped as documented (cache and reasoning tokens included), and that
 * the request is metered at the model's price (the log line's cost and the plan allowance;
 * on the Platform API, the workspace's credits).
 */

const OPENAI = "https://api.openai.test/v1";
const AZURE = "https://e2e-resource.openai.azure.test";
const ANTHROPIC = "https://api.anthropic.test";
const GEMINI = "https://generativelanguage.test/v1beta";
const BEDROCK = "https://bedrock-runtime.us-west-2.amazonaws.com";

const KEYS = {
  openai: "sk-e2e-openai",
  azure: "azure-e2e",
  anthropic: "sk-ant-e2e",
  gemini: "gemini-e2e",
  awsKeyId: "AKIDE2E",
  awsSecret: "secret-e2e",
};
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

type Upstream = ScriptedProvider & { handlers: HttpHandler[] };

interface Case {
  /** The model id clients name. */
  id: string;
  entry: () => Record<string, unknown>;
  upstream: Upstream;
  upstreamModel: string;
  price: { input: number; output: number };
  /** What the provider reports for every turn, in the mocks' neutral terms. */
  usage: MockUsage;
  /** The provider's own prefix of tool call ids. */
  callIdPrefix: string;
  /** Gemini 3's thought signature on the first call of a turn. */
  signature?: string;
  /** Path and query the provider was called on. */
  url(stream: boolean): string;
  /** The credential as the provider received it, and no other. */
  expectCredential(call: RecordedCall): void;
  /** The request's prompt in the provider's format: system "Be brief.", user "Say hello.", max_tokens 50, temperature 0.5. */
  prompt(stream: boolean): Record<string, unknown>;
  /** The `get_weather` tool offered with `tool_choice` `auto` or `required`, in the provider's format. */
  expectTools(body: any, choice: "auto" | "required"): void;
  /** The second turn's assistant tool calls and the two tool results, in the provider's native form. */
  toolTurns(ids: string[], sent: readonly unknown[]): unknown;
  /** The tool results of a request body, as the mock reads them (none: the mock refuses the request). */
  toolResults(body: any): unknown[];
}

const WEATHER_PARAMETERS = {
  type: "object",
  properties: { city: { type: "string", description: "City name" } },
  required: ["city"],
  additionalProperties: false,
};
const tools: OpenAI.Chat.Completions.ChatCompletionFunctionTool[] = [
  { type: "function", function: { name: "get_weather", description: "Current weather of a city", parameters: WEATHER_PARAMETERS } },
];
const QUESTION: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Weather in Paris and Rome?" },
];
const RESULTS = ['{"temp":21}', "sunny"];

const openaiBody = (stream: boolean) => ({
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Say hello." },
  ],
  max_tokens: 50,
  temperature: 0.5,
  ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
});
/**
 * A chat-format upstream gets the client's messages as the client sent them (docs/dialects.md
 * "Same dialect: forwarded"): the assistant turn the SDK handed back, every field of it, then the
 * results. The other upstreams get their native translation (each case's `toolTurns`).
 */
const openaiToolTurns = (_ids: string[], sent: readonly unknown[]) => sent.slice(-3);

const anthropic = createAnthropicUpstream(ANTHROPIC);
const gemini = createGeminiUpstream(GEMINI, { callIds: true });
const bedrock = createBedrockUpstream(BEDROCK);
const openai = createOpenAiChatUpstream(OPENAI);
const azure = createOpenAiChatUpstream(`${AZURE}/openai/deployments/gpt4o-prod`, { azure: true });
const msw = mockUpstreams(...anthropic.handlers, ...gemini.handlers, ...bedrock.handlers, ...openai.handlers, ...azure.handlers);

const CASES: Case[] = [
  {
    id: "via-openai",
    // streamUsage: the Platform's streams are billed on the provider's count too (docs/providers.md "Fields").
    entry: () => ({
      provider: "openai-compatible",
      baseURL: msw.url(OPENAI),
      apiKeyEnv: "E2E_OPENAI_KEY",
      upstreamModel: "gpt-4o-mini",
      streamUsage: true,
    }),
    upstream: openai,
    upstreamModel: "gpt-4o-mini",
    price: { input: 2500, output: 10000 },
    usage: { input: 12, output: 4, cacheRead: 6, thoughts: 3 },
    callIdPrefix: "call_",
    url: () => "https://api.openai.test/v1/chat/completions",
    expectCredential(call) {
      expect(call.headers.get("authorization")).toBe(`Bearer ${KEYS.openai}`);
      expect(call.headers.get("api-key")).toBeNull();
    },
    prompt: (stream) => ({ model: "gpt-4o-mini", ...openaiBody(stream) }),
    expectTools(body, choice) {
      expect(body.tools).toEqual(tools);
      expect(body.tool_choice).toBe(choice);
    },
    toolTurns: openaiToolTurns,
    toolResults: (body) => body.messages.filter((message: any) => message.role === "tool"),
  },
  {
    id: "via-azure",
    entry: () => ({
      provider: "azure-openai",
      baseURL: msw.url(AZURE),
      apiKeyEnv: "E2E_AZURE_KEY",
      upstreamModel: "gpt4o-prod",
      apiVersion: "2024-10-21",
      streamUsage: true,
    }),
    upstream: azure,
    upstreamModel: "gpt4o-prod",
    price: { input: 2000, output: 8000 },
    usage: { input: 12, output: 4, cacheRead: 6, thoughts: 3 },
    callIdPrefix: "call_",
    url: () => "https://e2e-resource.openai.azure.test/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
    expectCredential(call) {
      expect(call.headers.get("api-key")).toBe(KEYS.azure);
      expect(call.headers.get("authorization")).toBeNull();
    },
    prompt: (stream) => ({ model: "gpt4o-prod", ...openaiBody(stream) }),
    expectTools(body, choice) {
      expect(body.tools).toEqual(tools);
      expect(body.tool_choice).toBe(choice);
    },
    toolTurns: openaiToolTurns,
    toolResults: (body) => body.messages.filter((message: any) => message.role === "tool"),
  },
  {
    id: "via-anthropic",
    entry: () => ({
      provider: "anthropic",
      baseURL: msw.url(ANTHROPIC),
      apiKeyEnv: "E2E_ANTHROPIC_KEY",
      upstreamModel: "claude-haiku-4-5",
      maxOutputTokens: 256,
    }),
    upstream: anthropic,
    upstreamModel: "claude-haiku-4-5",
    price: { input: 3000, output: 15000 },
    usage: { input: 12, output: 4, cacheRead: 6, cacheWrite: 2 },
    callIdPrefix: "toolu_",
    url: () => "https://api.anthropic.test/v1/messages",
    expectCredential(call) {
      expect(call.headers.get("x-api-key")).toBe(KEYS.anthropic);
      expect(call.headers.get("anthropic-version")).toBe("2023-06-01");
      expect(call.headers.get("authorization")).toBeNull();
    },
    prompt: (stream) => ({
      model: "claude-haiku-4-5",
      system: "Be brief.",
      messages: [{ role: "user", content: [{ type: "text", text: "Say hello." }] }],
      max_tokens: 50,
      temperature: 0.5,
      ...(stream ? { stream: true } : {}),
    }),
    expectTools(body, choice) {
      expect(body.tools).toEqual([{ name: "get_weather", description: "Current weather of a city", input_schema: WEATHER_PARAMETERS }]);
      expect(body.tool_choice).toEqual({ type: choice === "auto" ? "auto" : "any" });
      // Anthropic requires max_tokens: without one, the model's output cap is sent.
      expect(body.max_tokens).toBe(256);
    },
    toolTurns: (ids) => [
      {
        role: "assistant",
        content: [
          { type: "text", text: "Let me check." },
          { type: "tool_use", id: ids[0], name: "get_weather", input: { city: "Paris" } },
          { type: "tool_use", id: ids[1], name: "get_weather", input: { city: "Rome" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: ids[0], content: RESULTS[0] },
          { type: "tool_result", tool_use_id: ids[1], content: RESULTS[1] },
        ],
      },
    ],
    toolResults: (body) =>
      body.messages.flatMap((message: any) =>
        message.role === "user" && Array.isArray(message.content)
          ? message.content.filter((block: any) => block.type === "tool_result")
          : [],
      ),
  },
  {
    id: "via-gemini",
    entry: () => ({ provider: "gemini", baseURL: msw.url(GEMINI), apiKeyEnv: "E2E_GEMINI_KEY", upstreamModel: "gemini-3-flash" }),
    upstream: gemini,
    upstreamModel: "gemini-3-flash",
    // Gemini 3: every call has an id, the first of a turn carries the thought signature.
    callIdPrefix: "fc_",
    signature: "c2lnLUE=",
    price: { input: 300, output: 2500 },
    usage: { input: 12, output: 4, cacheRead: 6, thoughts: 3 },
    url: (stream) =>
      `https://generativelanguage.test/v1beta/models/gemini-3-flash:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`,
    expectCredential(call) {
      expect(call.headers.get("x-goog-api-key")).toBe(KEYS.gemini);
      expect(call.headers.get("authorization")).toBeNull();
      expect(call.url.searchParams.has("key")).toBe(false);
    },
    prompt: () => ({
      systemInstruction: { parts: [{ text: "Be brief." }] },
      contents: [{ role: "user", parts: [{ text: "Say hello." }] }],
      generationConfig: { temperature: 0.5, maxOutputTokens: 50 },
    }),
    expectTools(body, choice) {
      // Gemini takes an OpenAPI subset of JSON Schema: additionalProperties is dropped.
      const { additionalProperties: _dropped, ...parameters } = WEATHER_PARAMETERS;
      expect(body.tools).toEqual([
        { functionDeclarations: [{ name: "get_weather", description: "Current weather of a city", parameters }] },
      ]);
      expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: choice === "auto" ? "AUTO" : "ANY" } });
    },
    toolTurns: () => [
      {
        role: "model",
        parts: [
          { text: "Let me check." },
          { functionCall: { id: "fc_paris1", name: "get_weather", args: { city: "Paris" } }, thoughtSignature: "c2lnLUE=" },
          { functionCall: { id: "fc_rome1", name: "get_weather", args: { city: "Rome" } } },
        ],
      },
      {
        role: "user",
        // The id and name of the call each answers; a JSON object result is passed as it is, text wrapped.
        parts: [
          { functionResponse: { id: "fc_paris1", name: "get_weather", response: { temp: 21 } } },
          { functionResponse: { id: "fc_rome1", name: "get_weather", response: { content: "sunny" } } },
        ],
      },
    ],
    toolResults: (body) => body.contents.flatMap((content: any) => content.parts.filter((part: any) => part.functionResponse)),
  },
  {
    id: "via-bedrock",
    entry: () => ({ provider: "bedrock", region: "us-west-2", baseURL: msw.url(BEDROCK), upstreamModel: "amazon.nova-pro-v1:0" }),
    upstream: bedrock,
    upstreamModel: "amazon.nova-pro-v1:0",
    price: { input: 800, output: 3200 },
    usage: { input: 12, output: 4, cacheRead: 6, cacheWrite: 2 },
    callIdPrefix: "tooluse_",
    url: (stream) =>
      `https://bedrock-runtime.us-west-2.amazonaws.com/model/amazon.nova-pro-v1%3A0/${stream ? "converse-stream" : "converse"}`,
    expectCredential(call) {
      expect(call.headers.get("authorization")).toMatch(
        new RegExp(
          `^AWS4-HMAC-SHA256 Credential=${KEYS.awsKeyId}/\\d{8}/us-west-2/bedrock/aws4_request, SignedHeaders=accept;content-type;host;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$`,
        ),
      );
      expect(call.headers.get("x-amz-date")).toMatch(/^\d{8}T\d{6}Z$/);
      // The signature covers the body as it was sent.
      expect(call.headers.get("x-amz-content-sha256")).toBe(createHash("sha256").update(call.raw).digest("hex"));
    },
    prompt: () => ({
      system: [{ text: "Be brief." }],
      messages: [{ role: "user", content: [{ text: "Say hello." }] }],
      inferenceConfig: { maxTokens: 50, temperature: 0.5 },
    }),
    expectTools(body, choice) {
      expect(body.toolConfig).toEqual({
        tools: [{ toolSpec: { name: "get_weather", description: "Current weather of a city", inputSchema: { json: WEATHER_PARAMETERS } } }],
        toolChoice: choice === "auto" ? { auto: {} } : { any: {} },
      });
    },
    toolTurns: (ids) => [
      {
        role: "assistant",
        content: [
          { text: "Let me check." },
          { toolUse: { toolUseId: ids[0], name: "get_weather", input: { city: "Paris" } } },
          { toolUse: { toolUseId: ids[1], name: "get_weather", input: { city: "Rome" } } },
        ],
      },
      {
        role: "user",
        content: [
          { toolResult: { toolUseId: ids[0], content: [{ text: RESULTS[0] }] } },
          { toolResult: { toolUseId: ids[1], content: [{ text: RESULTS[1] }] } },
        ],
      },
    ],
    toolResults: (body) => body.messages.flatMap((message: any) => message.content.filter((block: any) => block.toolResult)),
  },
];

/** The usage the gateway reports for a provider's: cache reads and writes are prompt tokens, reasoning tokens completion tokens (docs/providers.md). */
const mapped = (usage: MockUsage) => {
  const prompt = usage.input + (usage.cacheRead ?? 0) + (usage.cacheWrite ?? 0);
  const completion = usage.output + (usage.thoughts ?? 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
};
const priced = (price: Case["price"], usage: { prompt_tokens: number; completion_tokens: number }) =>
  Math.ceil((usage.prompt_tokens * price.input + usage.completion_tokens * price.output) / 1000);

let server: TestServer;
let gatewayKey: string;
let accountKey: string;

/** The raw body of the last answer the clients received (read beside the client, from a clone). */
let lastRaw: Promise<string> | undefined;
const recordingFetch: typeof fetch = async (input, init) => {
  const response = await loopbackFetch(input, init);
  lastRaw = response.clone().text();
  return response;
};

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("E2E_OPENAI_KEY", KEYS.openai);
  vi.stubEnv("E2E_AZURE_KEY", KEYS.azure);
  vi.stubEnv("E2E_ANTHROPIC_KEY", KEYS.anthropic);
  vi.stubEnv("E2E_GEMINI_KEY", KEYS.gemini);
  vi.stubEnv("AWS_ACCESS_KEY_ID", KEYS.awsKeyId);
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", KEYS.awsSecret);
  vi.stubEnv("AWS_SESSION_TOKEN", "");
  const models = Object.fromEntries(CASES.map((c) => [c.id, { ...c.entry(), price: c.price }]));
  server = await startTestServer({ MODELS_JSON: JSON.stringify({ models }) });
  const user = await registerUser(server);
  const gateway = await server.request("/gateway/v1/auth/keys", {
    method: "POST",
    headers: bearer(user.token),
    json: { name: "e2e", description: "providers" },
  });
  expect(gateway.status).toBe(201);
  gatewayKey = gateway.body.key;
  const account = await server.request("/account/v1/keys", { method: "POST", headers: bearer(user.token), json: { name: "e2e" } });
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
  for (const c of CASES) c.upstream.reset();
});

/** Tokens of the user's plan used so far (the Account and Gateway APIs draw on it). */
async function planUsed(): Promise<number> {
  const res = await server.request("/account/v1/models", { headers: bearer(accountKey) });
  expect(res.status).toBe(200);
  return res.body.plan.used as number;
}

/** The request's log line: the provider's usage, mapped, and its cost at the model's price. */
async function expectMetered(requestId: string, c: Case) {
  const usage = mapped(c.usage);
  await vi.waitFor(() => {
    const line = server.logs().find((entry) => entry.clientRequestId === requestId && entry.costMicrocredits !== undefined);
    expect(line).toMatchObject({
      model: c.id,
      inputTokens: usage.prompt_tokens,
      outputTokens: usage.completion_tokens,
      costMicrocredits: priced(c.price, usage),
    });
    expect(line).not.toHaveProperty("usageEstimated");
  });
}

/** Checks the request the provider received: where, with which headers, and the trace continued. */
function expectReceived(call: RecordedCall, c: Case, stream: boolean) {
  expect(call.url.href).toBe(c.url(stream));
  c.expectCredential(call);
  expect(call.headers.get("content-type")).toBe("application/json");
  expect(call.headers.get("accept")).toBe(
    !stream ? "application/json" : c.id === "via-bedrock" ? "application/vnd.amazon.eventstream" : "text/event-stream",
  );
  expect(call.headers.get("traceparent")).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
}

/** First a text and two tool calls; then, once the tool results are there in the provider's form, the answer. */
function toolScript(c: Case): (body: any, turn: number) => MockBehaviour {
  const calls = ["Paris", "Rome"].map((city, i) => ({
    id: `${c.callIdPrefix}${city.toLowerCase()}1`,
    name: "get_weather",
    input: { city },
    ...(i === 0 && c.signature ? { signature: c.signature } : {}),
  }));
  return (body, turn) => {
    if (turn === 0) return { kind: "turn", turn: { text: "Let me check.", toolCalls: calls, usage: c.usage } };
    if (c.toolResults(body).length !== 2) return { kind: "error", status: 400, body: { error: { message: "expected two tool results" } } };
    return { kind: "turn", turn: { text: "Paris is 21 degrees and Rome is sunny.", usage: c.usage } };
  };
}

function expectToolCalls(calls: OpenAI.Chat.Completions.ChatCompletionMessageToolCall[] | undefined, c: Case): string[] {
  expect(calls).toEqual(
    ["Paris", "Rome"].map((city) => ({
      // Gemini's thought signature travels in the id of its call (docs/providers.md).
      id: `${c.callIdPrefix}${city.toLowerCase()}1${city === "Paris" && c.signature ? `__thought__${c.signature}` : ""}`,
      type: "function",
      function: { name: "get_weather", arguments: JSON.stringify({ city }) },
    })),
  );
  return calls!.map((call) => call.id);
}

const SURFACES = [
  ["Gateway", "/gateway/v1", () => gatewayKey],
  ["Account", "/account/v1", () => accountKey],
] as const;

for (const [surface, base, credential] of SURFACES) {
  describe(`the ${surface} API with the official client`, () => {
    const client = () => openaiClient(server, base, credential(), { fetch: recordingFetch, defaultHeaders: { traceparent: TRACEPARENT } });
    const rid = () => ({ headers: { "x-request-id": `e2e-${randomUUID()}` } });

    for (const c of CASES) {
      describe(c.id, () => {
        it("answers JSON: content, finish_reason, the provider's usage mapped, metered at the model's price", async () => {
          c.upstream.script(c.upstreamModel, { kind: "turn", turn: { text: "Hello from the provider.", usage: c.usage } });
          const used = await planUsed();
          const options = rid();
          const { data: completion, response } = await client()
            .chat.completions.create(
              {
                model: c.id,
                messages: [
                  { role: "system", content: "Be brief." },
                  { role: "user", content: "Say hello." },
                ],
                max_tokens: 50,
                temperature: 0.5,
              },
              options,
            )
            .withResponse();
          expect(response.headers.get("content-type")).toMatch(/^application\/json/);
          expect(completion).toMatchObject({
            object: "chat.completion",
            model: c.id,
            id: expect.any(String),
            created: expect.any(Number),
            choices: [{ index: 0, message: { role: "assistant", content: "Hello from the provider." }, finish_reason: "stop" }],
            usage: mapped(c.usage),
          });
          expect(completion.choices[0]!.message.tool_calls ?? []).toEqual([]);
          expect(c.upstream.calls).toHaveLength(1);
          const [call] = c.upstream.calls;
          expectReceived(call!, c, false);
          expect(call!.body).toEqual(c.prompt(false));
          await expectMetered(options.headers["x-request-id"], c);
          expect((await planUsed()) - used).toBe(mapped(c.usage).total_tokens);
        });

        it("streams: one id, the role first, text in pieces, one finish_reason, usage last when asked for, then [DONE]", async () => {
          c.upstream.script(c.upstreamModel, { kind: "turn", turn: { text: "one two three four", usage: c.usage } });
          const used = await planUsed();
          const options = rid();
          const { data: stream, response } = await client()
            .chat.completions.create(
              {
                model: c.id,
                messages: [
                  { role: "system", content: "Be brief." },
                  { role: "user", content: "Say hello." },
                ],
                max_tokens: 50,
                temperature: 0.5,
                stream: true,
                stream_options: { include_usage: true },
              },
              options,
            )
            .withResponse();
          expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
          const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
          for await (const chunk of stream) chunks.push(chunk);
          expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.model === c.id)).toBe(true);
          expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
          expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
          const pieces = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").filter(Boolean);
          expect(pieces.length).toBeGreaterThan(1);
          expect(pieces.join("")).toBe("one two three four");
          expect(chunks.flatMap((chunk) => chunk.choices.map((choice) => choice.finish_reason)).filter(Boolean)).toEqual(["stop"]);
          expect(chunks.at(-1)).toMatchObject({ choices: [], usage: mapped(c.usage) });
          expect(chunks.slice(0, -1).some((chunk) => chunk.usage)).toBe(false);
          const frames = sseData(await lastRaw!);
          expect(frames.at(-1)).toBe("[DONE]");
          expect(frames).toHaveLength(chunks.length + 1);
          expectReceived(c.upstream.calls[0]!, c, true);
          expect(c.upstream.calls[0]!.body).toEqual(c.prompt(true));
          await expectMetered(options.headers["x-request-id"], c);
          expect((await planUsed()) - used).toBe(mapped(c.usage).total_tokens);

          // Without stream_options the usage frame stays behind; the request is metered the same.
          const quiet = rid();
          const plain = await client().chat.completions.create(
            { model: c.id, messages: [{ role: "user", content: "Say hello." }], stream: true },
            quiet,
          );
          const plainChunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
          for await (const chunk of plain) plainChunks.push(chunk);
          expect(plainChunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe("one two three four");
          expect(plainChunks.some((chunk) => chunk.usage || chunk.choices.length === 0)).toBe(false);
          expect(sseData(await lastRaw!).at(-1)).toBe("[DONE]");
          await expectMetered(quiet.headers["x-request-id"], c);
        });

        it("round-trips tool calls as JSON: the provider's native calls come back as tool_calls, the tool results reach it in its native form", async () => {
          c.upstream.script(c.upstreamModel, toolScript(c));
          const used = await planUsed();
          const first = rid();
          const asked = await client().chat.completions.create({ model: c.id, messages: QUESTION, tools, tool_choice: "auto" }, first);
          expect(asked).toMatchObject({
            model: c.id,
            choices: [{ index: 0, finish_reason: "tool_calls", message: { role: "assistant", content: "Let me check." } }],
            usage: mapped(c.usage),
          });
          const ids = expectToolCalls(asked.choices[0]!.message.tool_calls, c);
          c.expectTools(c.upstream.calls[0]!.body, "auto");
          expectReceived(c.upstream.calls[0]!, c, false);

          const second = rid();
          const messages = [
            ...QUESTION,
            asked.choices[0]!.message,
            { role: "tool" as const, tool_call_id: ids[0]!, content: RESULTS[0]! },
            { role: "tool" as const, tool_call_id: ids[1]!, content: RESULTS[1]! },
          ];
          const answered = await client().chat.completions.create({ model: c.id, tools, messages }, second);
          expect(answered).toMatchObject({
            choices: [{ finish_reason: "stop", message: { role: "assistant", content: "Paris is 21 degrees and Rome is sunny." } }],
            usage: mapped(c.usage),
          });
          const body = c.upstream.calls[1]!.body;
          const expected = c.toolTurns(ids, JSON.parse(JSON.stringify(messages))) as unknown[];
          expect((body.messages ?? body.contents).slice(-expected.length)).toEqual(expected);
          await expectMetered(first.headers["x-request-id"], c);
          await expectMetered(second.headers["x-request-id"], c);
          expect((await planUsed()) - used).toBe(2 * mapped(c.usage).total_tokens);
        });

        it("round-trips tool calls streamed: each call's id and name first, its arguments in pieces, finish_reason tool_calls", async () => {
          c.upstream.script(c.upstreamModel, toolScript(c));
          const used = await planUsed();
          const first = rid();
          // The client's stream helper assembles the answer and checks every call has an id, a type, a name and arguments.
          const runner = client().chat.completions.stream(
            { model: c.id, messages: QUESTION, tools, tool_choice: "required", stream_options: { include_usage: true } },
            first,
          );
          const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
          for await (const chunk of runner) chunks.push(chunk);
          const asked = await runner.finalChatCompletion();
          expect(sseData(await lastRaw!).at(-1)).toBe("[DONE]");
          expect(asked).toMatchObject({
            model: c.id,
            choices: [{ finish_reason: "tool_calls", message: { role: "assistant", content: "Let me check." } }],
            usage: mapped(c.usage),
          });
          const ids = expectToolCalls(asked.choices[0]!.message.tool_calls, c);
          // The ids are the ones streamed (the helper would make one up for a call streamed without).
          const starts = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []).filter((delta) => delta.id);
          expect(starts.map((delta) => [delta.index, delta.id, delta.type, delta.function?.name])).toEqual([
            [0, ids[0], "function", "get_weather"],
            [1, ids[1], "function", "get_weather"],
          ]);
          c.expectTools(c.upstream.calls[0]!.body, "required");
          expectReceived(c.upstream.calls[0]!, c, true);

          const second = rid();
          const messages = [
            ...QUESTION,
            asked.choices[0]!.message,
            { role: "tool" as const, tool_call_id: ids[0]!, content: RESULTS[0]! },
            { role: "tool" as const, tool_call_id: ids[1]!, content: RESULTS[1]! },
          ];
          const answer = client().chat.completions.stream(
            { model: c.id, tools, messages, stream_options: { include_usage: true } },
            second,
          );
          const answered = await answer.finalChatCompletion();
          expect(answered).toMatchObject({
            choices: [{ finish_reason: "stop", message: { role: "assistant", content: "Paris is 21 degrees and Rome is sunny." } }],
            usage: mapped(c.usage),
          });
          const body = c.upstream.calls[1]!.body;
          const expected = c.toolTurns(ids, JSON.parse(JSON.stringify(messages))) as unknown[];
          expect((body.messages ?? body.contents).slice(-expected.length)).toEqual(expected);
          await expectMetered(first.headers["x-request-id"], c);
          await expectMetered(second.headers["x-request-id"], c);
          expect((await planUsed()) - used).toBe(2 * mapped(c.usage).total_tokens);
        });
      });
    }
  });
}

describe("the Platform API charges the workspace the provider's usage at the model's price", () => {
  for (const c of CASES) {
    it(`${c.id}: JSON and streamed`, async () => {
      const account = await platformAccount(server, 1);
      const balance = () => server.composition.ports.repos.credits.balance(account.workspaceId);
      const client = openaiClient(server, "/api/v1", account.key);
      c.upstream.script(c.upstreamModel, { kind: "turn", turn: { text: "charged answer", usage: c.usage } });
      const start = await balance();
      const completion = await client.chat.completions.create({ model: c.id, messages: [{ role: "user", content: "Say hello." }] });
      expect(completion.usage).toMatchObject(mapped(c.usage));
      expect(start - (await balance())).toBe(priced(c.price, mapped(c.usage)));
      const stream = await client.chat.completions.create({
        model: c.id,
        messages: [{ role: "user", content: "Say hello." }],
        stream: true,
      });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      expect(text).toBe("charged answer");
      await vi.waitFor(async () => expect(start - (await balance())).toBe(2 * priced(c.price, mapped(c.usage))));
      const { ledger } = server.composition.ports.repos;
      expect((await ledger.state(ledger.credits(account.workspaceId))).held).toBe(0);
    });
  }
});
