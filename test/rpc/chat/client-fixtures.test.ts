import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createAnthropicUpstream } from "../../../mocks/anthropic-upstream.js";
import { createBedrockUpstream } from "../../../mocks/bedrock-upstream.js";
import { createGeminiUpstream } from "../../../mocks/gemini-upstream.js";
import { createOpenAiChatUpstream } from "../../../mocks/openai-chat-upstream.js";
import { createOpenAiResponsesUpstream } from "../../../mocks/openai-responses-upstream.js";
import type { ScriptedProvider } from "../../../mocks/scripted-provider.js";
import { clientFixtures } from "../../helpers/fixtures.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * The golden fixtures (test/fixtures/clients/, docs/clients.md): every request the newest real
 * clients sent — Claude Code, Codex CLI, the openai and Anthropic SDKs, the AI SDK, LangChain, the
 * Agents SDK — replayed through every provider adapter against the providers' mocks, which answer
 * 400 to what their real API refuses. The provider receives what its API accepts (the client's
 * own request, unchanged but for the model, when it speaks the client's dialect), and the client
 * gets an answer of its dialect's shape, JSON or streamed. A new client shape is one new fixture.
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

/** Each kind of upstream: its model, its mock, and the dialect it takes as it is. */
const TARGETS: { model: string; mock?: ScriptedProvider; native?: string; entry: Record<string, unknown> }[] = [
  { model: "echo-1", entry: { provider: "echo" } },
  { model: "m-chat", mock: openai, native: "chat", entry: { provider: "openai-compatible", baseURL: OPENAI, apiKeyEnv: "FIX_KEY" } },
  {
    model: "m-responses",
    mock: responses,
    native: "responses",
    entry: { provider: "openai-compatible", baseURL: RESPONSES, apiKeyEnv: "FIX_KEY", apis: ["responses"] },
  },
  { model: "m-anthropic", mock: anthropic, native: "messages", entry: { provider: "anthropic", baseURL: ANTHROPIC, apiKeyEnv: "FIX_KEY" } },
  { model: "m-gemini", mock: gemini, entry: { provider: "gemini", baseURL: GEMINI, apiKeyEnv: "FIX_KEY" } },
  {
    model: "m-bedrock",
    mock: bedrock,
    entry: { provider: "bedrock", baseURL: BEDROCK, region: "us-east-1", upstreamModel: "anthropic.claude-sonnet-4" },
  },
];

const ROUTES: Record<string, string> = {
  chat: "/gateway/v1/chat/completions",
  responses: "/gateway/v1/responses",
  messages: "/gateway/v1/messages",
  count_tokens: "/gateway/v1/messages/count_tokens",
};

/** Every replayable request of every fixture: the chat dialects (embeddings have their own tests). */
const REQUESTS = clientFixtures().flatMap((fixture) =>
  fixture.requests
    .map((request, index) => ({ fixture, request, index }))
    .filter(({ request }) => request.dialect in ROUTES)
    .map(({ fixture, request, index }) => ({ name: `${fixture.client} ${fixture.scenario} #${index + 1}`, request })),
);

let server: TestServer;
let token: string;

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("FIX_KEY", "sk-fixtures");
  vi.stubEnv("AWS_ACCESS_KEY_ID", "AKIDFIXTURES");
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", "secret-fixtures");
  vi.stubEnv("AWS_SESSION_TOKEN", "");
  const models = Object.fromEntries(
    TARGETS.map((target) => [
      target.model,
      { ...target.entry, ...(typeof target.entry.baseURL === "string" ? { baseURL: msw.url(target.entry.baseURL) } : {}) },
    ]),
  );
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
  for (const target of TARGETS) target.mock?.reset();
});

/** SSE frames: `event:` names and parsed `data:` (`[DONE]` as a string). */
function frames(text: string): { event?: string; data: any }[] {
  return text
    .split("\n\n")
    .filter((frame) => frame.trim())
    .map((frame) => {
      const event = /^event: (.*)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)?.[1] ?? "";
      return { ...(event ? { event } : {}), data: data === "[DONE]" ? data : JSON.parse(data) };
    });
}

/** The answer has its dialect's shape, as the client's SDK parses it. */
function expectShape(dialect: string, stream: boolean, body: unknown): void {
  if (dialect === "count_tokens") return void expect(body).toEqual({ input_tokens: expect.any(Number) });
  if (!stream) {
    if (dialect === "chat")
      expect(body).toMatchObject({
        object: "chat.completion",
        choices: [{ message: { role: "assistant" }, finish_reason: expect.any(String) }],
        usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) },
      });
    if (dialect === "responses")
      expect(body).toMatchObject({
        object: "response",
        status: expect.stringMatching(/^(completed|incomplete)$/),
        output: expect.any(Array),
      });
    if (dialect === "messages")
      expect(body).toMatchObject({
        type: "message",
        role: "assistant",
        content: expect.any(Array),
        usage: { input_tokens: expect.any(Number) },
      });
    return;
  }
  const events = frames(body as string);
  if (dialect === "chat") {
    expect(events.at(-1)!.data).toBe("[DONE]");
    for (const event of events.slice(0, -1)) expect(event.data.object).toBe("chat.completion.chunk");
  }
  if (dialect === "responses") {
    expect(events.map((event) => event.event)).toEqual(events.map((event) => event.data.type));
    expect(events.map((event) => event.data.sequence_number)).toEqual(events.map((_event, index) => index));
    expect(events.at(-1)!.data.type).toMatch(/^response\.(completed|incomplete)$/);
  }
  if (dialect === "messages") {
    expect(events.map((event) => event.event)).toEqual(events.map((event) => event.data.type));
    expect(events[0]!.data.type).toBe("message_start");
    expect(events.at(-1)!.data.type).toBe("message_stop");
  }
}

describe.each(TARGETS.map((target) => [target.model, target]))("every recorded client request on %s", (_model, target) => {
  it.each(REQUESTS.map((entry) => [entry.name, entry.request]))("%s", async (_name, request) => {
    const body: Record<string, unknown> = { ...(request.body as Record<string, unknown>), model: target.model };
    const query = request.path.includes("?") ? request.path.slice(request.path.indexOf("?")) : "";
    const headers: Record<string, string> = { ...bearer(token) };
    for (const name of ["anthropic-beta", "anthropic-version"]) if (request.headers[name]) headers[name] = request.headers[name]!;
    const res = await server.request(`${ROUTES[request.dialect]}${query}`, { method: "POST", headers, json: body });
    expect(res.status, `${res.status} ${JSON.stringify(res.body).slice(0, 600)}`).toBe(200);
    expectShape(request.dialect, body.stream === true, res.body);
    if (request.dialect === "count_tokens" || !target.mock) return;
    const sent = target.mock.calls.at(-1)!.body;
    // An upstream of the client's dialect gets the client's own request.
    if (target.native === request.dialect) {
      const expected: Record<string, unknown> = { ...(request.body as Record<string, unknown>), model: sent.model };
      if (request.dialect === "chat" && body.stream === true)
        expected.stream_options = { ...(expected.stream_options as object | undefined), include_usage: true };
      expect(sent).toEqual(expected);
    }
  });
});
