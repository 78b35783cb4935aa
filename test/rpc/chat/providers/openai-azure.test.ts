import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { http } from "msw";
import { ServiceError } from "../../../../rpc/errors.js";
import { ProviderError } from "../../../../rpc/chat/providers/provider-error.js";
import { createOpenAiUpstream } from "../../../../mocks/openai-upstream.js";
import { createToolCallingUpstream } from "../../../../mocks/openai-tools.js";
import { createOpenAiChatUpstream } from "../../../../mocks/openai-chat-upstream.js";
import { frameStream } from "../../../../mocks/scripted-provider.js";
import { mockUpstreams } from "../../../helpers/mock-upstreams.js";
import { TOOL_CONVERSATION, assemble, completionOf, drainStream, providerFor } from "../../../helpers/providers.js";

/** The openai-compatible and azure-openai adapters: one wire format, two addressing schemes (docs/providers.md). */

const OPENAI = "https://api.openai.test/v1";
const AZURE = "https://my-resource.openai.azure.test";
const AZURE_TOOLS = "https://tools-resource.openai.azure.test";
const openai = createOpenAiUpstream(OPENAI);
const azure = createOpenAiUpstream(`${AZURE}/openai/deployments/gpt4o-prod`);
const azureTools = createToolCallingUpstream(`${AZURE_TOOLS}/openai/deployments/gpt4o-tools`);
const AZURE_FILTERED = "https://filtered-resource.openai.azure.test";
const azureFiltered = createOpenAiChatUpstream(`${AZURE_FILTERED}/openai/deployments/gpt4o-filtered`, { azure: true });
const msw = mockUpstreams(...openai.handlers, ...azure.handlers, ...azureTools.handlers, ...azureFiltered.handlers);
const env = { OPENAI_KEY: "sk-openai", AZURE_KEY: "azure-secret" };
const signal = () => new AbortController().signal;

beforeAll(() => msw.listen());
afterAll(() => msw.close());
beforeEach(() => {
  openai.reset();
  azure.reset();
  azureTools.reset();
  azureFiltered.reset();
});

describe("azure-openai adapter", () => {
  it("posts to /openai/deployments/<deployment>/chat/completions?api-version=… with the key in api-key", async () => {
    const { provider } = providerFor(
      "gpt-4o",
      { provider: "azure-openai", baseURL: msw.url(AZURE), apiKeyEnv: "AZURE_KEY", upstreamModel: "gpt4o-prod", apiVersion: "2024-10-21" },
      env,
    );
    const completion = completionOf(
      await provider.complete({ model: "gpt-4o", messages: [{ role: "user", content: "hello azure" }], stop: ["x"] }, signal(), {
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      }),
    );
    expect(completion.choices[0]!.message.content).toBe("hello azure");
    const [call] = azure.calls;
    expect(call!.url.pathname).toBe("/openai/deployments/gpt4o-prod/chat/completions");
    expect(call!.url.searchParams.get("api-version")).toBe("2024-10-21");
    expect(call!.headers.get("api-key")).toBe("azure-secret");
    expect(call!.headers.get("authorization")).toBeNull();
    expect(call!.headers.get("traceparent")).toBe("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    expect(call!.body).toMatchObject({ model: "gpt4o-prod", messages: [{ role: "user", content: "hello azure" }], stop: ["x"] });

    const { chunks, error } = await drainStream(
      await provider.complete({ model: "gpt-4o", stream: true, messages: [{ role: "user", content: "streamed azure" }] }, signal()),
    );
    expect(error).toBeUndefined();
    expect(azure.calls[1]!.body.stream_options).toEqual({ include_usage: true });
    expect(assemble(chunks)).toMatchObject({ content: "streamed azure", finish: "stop", usage: { completion_tokens: 2 } });
  });

  it("defaults api-version, sends tool fields as they are, and passes streamed tool_calls deltas through", async () => {
    const { provider, config } = providerFor(
      "tools",
      { provider: "azure-openai", baseURL: msw.url(AZURE_TOOLS), apiKeyEnv: "AZURE_KEY", upstreamModel: "gpt4o-tools" },
      env,
    );
    expect(config).toMatchObject({ provider: "azure-openai", apiVersion: "2024-10-21" });
    azureTools.script("gpt4o-tools", () => ({ toolCalls: [{ name: "weather", arguments: { city: "Oslo" } }] }));
    const { chunks, error } = await drainStream(
      await provider.complete(
        { model: "tools", stream: true, ...TOOL_CONVERSATION, tool_choice: "required", parallel_tool_calls: false },
        signal(),
      ),
    );
    expect(error).toBeUndefined();
    expect(azureTools.calls[0]).toMatchObject({
      model: "gpt4o-tools",
      tools: TOOL_CONVERSATION.tools,
      tool_choice: "required",
      parallel_tool_calls: false,
      messages: TOOL_CONVERSATION.messages,
    });
    expect(assemble(chunks)).toMatchObject({
      finish: "tool_calls",
      toolCalls: [{ id: expect.any(String), type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } }],
    });
  });
});

describe("azure-openai content filtering", () => {
  const provider = () =>
    providerFor(
      "filtered",
      { provider: "azure-openai", baseURL: msw.url(AZURE_FILTERED), apiKeyEnv: "AZURE_KEY", upstreamModel: "gpt4o-filtered" },
      env,
    ).provider;

  it("leaves Azure's filter chunks out of a stream: the first one without choices, annotations without a delta", async () => {
    azureFiltered.script("gpt4o-filtered", { kind: "turn", turn: { text: "all clear here", usage: { input: 9, output: 3 } } });
    const { chunks, error } = await drainStream(
      await provider().complete({ model: "filtered", stream: true, messages: [{ role: "user", content: "hi" }] }, signal()),
    );
    expect(error).toBeUndefined();
    // Every chunk has the shape and id of the answer's chunks; the role comes first.
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.id === chunks[0]!.id && chunk.id)).toBe(true);
    expect(chunks.every((chunk) => (chunk.choices!.length ? chunk.choices!.every((choice) => choice.delta) : chunk.usage))).toBe(true);
    expect(chunks[0]!.choices![0]!.delta).toMatchObject({ role: "assistant" });
    expect(assemble(chunks)).toMatchObject({
      content: "all clear here",
      finish: "stop",
      usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 },
    });
    // A JSON answer keeps them: they are fields beside those of the format.
    const completion = completionOf(
      await provider().complete({ model: "filtered", messages: [{ role: "user", content: "hi" }] }, signal()),
    );
    expect(completion).toMatchObject({
      choices: [{ message: { content: "all clear here" }, content_filter_results: { hate: { filtered: false } } }],
      prompt_filter_results: [{ prompt_index: 0 }],
    });
  });

  it("keeps a finish_reason that comes without a delta, with an empty one", async () => {
    const encoder = new TextEncoder();
    const frame = (data: unknown) => encoder.encode(`data: ${JSON.stringify(data)}\n\n`);
    const chunk = (choices: unknown[]) => ({ id: "chatcmpl-f", object: "chat.completion.chunk", created: 1, model: "gpt-4o", choices });
    msw.use(
      http.post(`${AZURE_FILTERED}/openai/deployments/gpt4o-cut/chat/completions`, () =>
        frameStream(
          [
            frame({ id: "", object: "", created: 0, model: "", choices: [], prompt_filter_results: [] }),
            frame(chunk([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }])),
            frame(chunk([{ index: 0, delta: { content: "Some" }, finish_reason: null }])),
            frame(
              chunk([
                { index: 0, finish_reason: "content_filter", content_filter_results: { violence: { filtered: true, severity: "high" } } },
              ]),
            ),
            encoder.encode("data: [DONE]\n\n"),
          ],
          "text/event-stream",
        ),
      ),
    );
    try {
      const cut = providerFor(
        "cut",
        { provider: "azure-openai", baseURL: msw.url(AZURE_FILTERED), apiKeyEnv: "AZURE_KEY", upstreamModel: "gpt4o-cut" },
        env,
      ).provider;
      const { chunks, error } = await drainStream(
        await cut.complete({ model: "cut", stream: true, messages: [{ role: "user", content: "hi" }] }, signal()),
      );
      expect(error).toBeUndefined();
      expect(chunks.map((c) => c.choices)).toEqual([
        [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }],
        [{ index: 0, delta: { content: "Some" }, finish_reason: null }],
        [
          {
            index: 0,
            delta: {},
            finish_reason: "content_filter",
            content_filter_results: { violence: { filtered: true, severity: "high" } },
          },
        ],
      ]);
    } finally {
      msw.resetHandlers();
    }
  });
});

describe("openai-compatible adapter errors", () => {
  const provider = () =>
    providerFor("gpt", { provider: "openai-compatible", baseURL: msw.url(OPENAI), apiKeyEnv: "OPENAI_KEY", upstreamModel: "gpt-up" }, env)
      .provider;

  it("drops tool_choice and parallel_tool_calls with an empty tool list", async () => {
    await provider().complete(
      { model: "gpt", messages: [{ role: "user", content: "x" }], tools: [], tool_choice: "auto", parallel_tool_calls: true },
      signal(),
    );
    expect(openai.calls[0]!.body).not.toHaveProperty("tools");
    expect(openai.calls[0]!.body).not.toHaveProperty("tool_choice");
    expect(openai.calls[0]!.body).not.toHaveProperty("parallel_tool_calls");
    expect(openai.calls[0]!.headers.get("authorization")).toBe("Bearer sk-openai");
  });

  it("relays a 4xx verbatim as not retryable; 429 with retry-after-ms, 408 and 5xx are retryable; a cut stream ends with the cut error", async () => {
    const cases = [
      { status: 400, headers: {}, retryable: false, retryAfterMs: undefined },
      { status: 404, headers: {}, retryable: false, retryAfterMs: undefined },
      { status: 422, headers: {}, retryable: false, retryAfterMs: undefined },
      { status: 408, headers: {}, retryable: true, retryAfterMs: undefined },
      { status: 429, headers: { "retry-after-ms": "1500", "retry-after": "2" }, retryable: true, retryAfterMs: 1500 },
      {
        status: 429,
        headers: { "retry-after": new Date(Date.now() + 60_000).toUTCString() },
        retryable: true,
        retryAfterMs: "about a minute",
      },
      { status: 502, headers: {}, retryable: true, retryAfterMs: undefined },
    ] as const;
    for (const item of cases) {
      const body = { error: { message: `failed with ${item.status}`, type: "x", code: null } };
      openai.script("gpt-up", { kind: "error", status: item.status, body, headers: item.headers });
      const error = await provider()
        .complete({ model: "gpt", messages: [{ role: "user", content: "x" }] }, signal())
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderError);
      expect(error).toMatchObject({
        code: "UPSTREAM",
        status: item.status,
        upstreamStatus: item.status,
        upstreamBody: body,
        retryable: item.retryable,
      });
      if (item.retryAfterMs === "about a minute") expect((error as ProviderError).retryAfterMs).toBeGreaterThan(55_000);
      else expect((error as ProviderError).retryAfterMs).toBe(item.retryAfterMs);
    }
    openai.script("gpt-up", { kind: "stream", words: ["a", " b", " c"], dropAfter: 2 });
    const cut = await drainStream(
      await provider().complete({ model: "gpt", stream: true, messages: [{ role: "user", content: "x" }] }, signal()),
    );
    expect(assemble(cut.chunks).content).toBe("a b");
    expect(cut.error).toBeInstanceOf(ServiceError);
    expect(cut.error).toMatchObject({ code: "BAD_GATEWAY", message: expect.stringContaining("closed the stream early") });
  });

  it("marks a timeout before the first byte as a retryable 504", async () => {
    openai.script("gpt-up", { kind: "hang" });
    const quick = providerFor(
      "gpt",
      { provider: "openai-compatible", baseURL: msw.url(OPENAI), upstreamModel: "gpt-up", timeoutSeconds: 0.3 },
      env,
    ).provider;
    const error = await quick.complete({ model: "gpt", messages: [{ role: "user", content: "x" }] }, signal()).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "TIMEOUT", status: 504, retryable: true });
    expect(error).toBeInstanceOf(ProviderError);
  });
});
