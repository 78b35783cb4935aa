import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ServiceError } from "../../../../rpc/errors.js";
import { ProviderError } from "../../../../rpc/chat/providers/provider-error.js";
import { createGeminiUpstream } from "../../../../mocks/gemini-upstream.js";
import { mockUpstreams } from "../../../helpers/mock-upstreams.js";
import { TOOL_CONVERSATION, assemble, completionOf, drainStream, providerFor } from "../../../helpers/providers.js";

/** The gemini adapter against a mock speaking the Generative Language API (docs/providers.md). */

const BASE = "https://generativelanguage.test/v1beta";
const upstream = createGeminiUpstream(BASE);
/** Gemini 3: every function call has an id, the first of a turn a thought signature. */
const BASE3 = "https://gemini3.generativelanguage.test/v1beta";
const gemini3 = createGeminiUpstream(BASE3, { callIds: true });
const msw = mockUpstreams(...upstream.handlers, ...gemini3.handlers);
const env = { GEMINI_KEY: "AIza-test" };
const signal = () => new AbortController().signal;
let provider: ReturnType<typeof providerFor>["provider"];

beforeAll(async () => {
  await msw.listen();
  provider = providerFor(
    "flash",
    { provider: "gemini", baseURL: msw.url(BASE), apiKeyEnv: "GEMINI_KEY", upstreamModel: "gemini-2.5-flash" },
    env,
  ).provider;
});
afterAll(() => msw.close());
beforeEach(() => {
  upstream.reset();
  gemini3.reset();
});

describe("gemini adapter", () => {
  it("translates a JSON request and answer: contents, systemInstruction, generationConfig, key header, usage", async () => {
    upstream.script("gemini-2.5-flash", { kind: "turn", turn: { text: "Hello there", finish: "length", usage: { input: 7, output: 2 } } });
    const completion = completionOf(
      await provider.complete(
        {
          model: "flash",
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: "Hi" },
            { role: "assistant", content: "Hello." },
            {
              role: "user",
              content: [
                { type: "text", text: "Again" },
                { type: "image_url", image_url: { url: "data:image/jpeg;base64,/9j/4AAQ" } },
              ],
            },
          ],
          temperature: 0.3,
          top_p: 0.8,
          max_tokens: 64,
          stop: ["END", "STOP"],
        },
        signal(),
        { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
      ),
    );
    expect(completion).toMatchObject({
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content: "Hello there" }, finish_reason: "length" }],
      usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 },
    });
    const [call] = upstream.calls;
    expect(call!.url.pathname).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
    expect(call!.headers.get("x-goog-api-key")).toBe("AIza-test");
    expect(call!.headers.get("traceparent")).toBe("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    expect(call!.body).toEqual({
      contents: [
        { role: "user", parts: [{ text: "Hi" }] },
        { role: "model", parts: [{ text: "Hello." }] },
        { role: "user", parts: [{ text: "Again" }, { inlineData: { mimeType: "image/jpeg", data: "/9j/4AAQ" } }] },
      ],
      systemInstruction: { parts: [{ text: "Be brief." }] },
      generationConfig: { temperature: 0.3, topP: 0.8, maxOutputTokens: 64, stopSequences: ["END", "STOP"] },
    });
  });

  it("streams from :streamGenerateContent?alt=sse as chunk frames with the usage last", async () => {
    upstream.script("gemini-2.5-flash", { kind: "turn", turn: { text: "one two three", usage: { input: 5, output: 3 } } });
    const { chunks, error } = await drainStream(
      await provider.complete({ model: "flash", stream: true, messages: [{ role: "user", content: "count" }] }, signal()),
    );
    expect(error).toBeUndefined();
    expect(upstream.calls[0]!.url.pathname).toBe("/v1beta/models/gemini-2.5-flash:streamGenerateContent");
    expect(upstream.calls[0]!.url.searchParams.get("alt")).toBe("sse");
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk")).toBe(true);
    expect(chunks[0]!.choices![0]!.delta).toEqual({ role: "assistant", content: "one" });
    expect(assemble(chunks)).toMatchObject({ role: "assistant", content: "one two three", finish: "stop" });
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 } });
  });

  it("translates tools into functionDeclarations, calls into functionCall and results into functionResponse parts", async () => {
    await provider.complete({ model: "flash", ...TOOL_CONVERSATION, tool_choice: "required" }, signal());
    const body = upstream.calls[0]!.body;
    expect(body.systemInstruction).toEqual({ parts: [{ text: "Be brief." }] });
    // Schema keywords outside Gemini's subset are dropped.
    expect(body.tools).toEqual([
      {
        functionDeclarations: [
          {
            name: "weather",
            description: "Current weather of a city",
            parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          },
        ],
      },
    ]);
    expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: "ANY" } });
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "Weather in Paris and Rome?" }] },
      // The client's call ids go with the calls and with the results that answer them.
      {
        role: "model",
        parts: [
          { functionCall: { id: "call_1", name: "weather", args: { city: "Paris" } } },
          { functionCall: { id: "call_2", name: "weather", args: { city: "Rome" } } },
        ],
      },
      // The results name their function (from the call they answer), in one user turn.
      {
        role: "user",
        parts: [
          { functionResponse: { id: "call_1", name: "weather", response: { temp: 21 } } },
          { functionResponse: { id: "call_2", name: "weather", response: { content: "sunny" } } },
        ],
      },
    ]);
    upstream.reset();
    await provider.complete(
      { model: "flash", ...TOOL_CONVERSATION, tool_choice: { type: "function", function: { name: "weather" } } },
      signal(),
    );
    expect(upstream.calls[0]!.body.toolConfig).toEqual({ functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["weather"] } });
  });

  it("answers functionCall parts as tool_calls, as JSON and as streamed deltas", async () => {
    const turn = {
      toolCalls: [
        { id: "unused", name: "weather", input: { city: "Paris" } },
        { id: "unused", name: "weather", input: { city: "Rome" } },
      ],
    };
    upstream.script("gemini-2.5-flash", { kind: "turn", turn });
    const completion = completionOf(await provider.complete({ model: "flash", ...TOOL_CONVERSATION }, signal()));
    expect(completion.choices[0]).toMatchObject({
      finish_reason: "tool_calls",
      message: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: expect.stringMatching(/^call_/), type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: expect.stringMatching(/^call_/), type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
        ],
      },
    });
    const { chunks, error } = await drainStream(await provider.complete({ model: "flash", stream: true, ...TOOL_CONVERSATION }, signal()));
    expect(error).toBeUndefined();
    const assembled = assemble(chunks);
    expect(assembled).toMatchObject({ finish: "tool_calls", content: "" });
    expect(assembled.toolCalls.map((call) => [call.function.name, JSON.parse(call.function.arguments)])).toEqual([
      ["weather", { city: "Paris" }],
      ["weather", { city: "Rome" }],
    ]);
    expect(new Set(assembled.toolCalls.map((call) => call.id)).size).toBe(2);
  });

  it("sends back the ids Gemini 3 gives its calls on the functionCall and functionResponse parts, and the thought signature, but no id made up for a call without one", async () => {
    const three = providerFor(
      "three",
      { provider: "gemini", baseURL: msw.url(BASE3), apiKeyEnv: "GEMINI_KEY", upstreamModel: "gemini-3-flash" },
      env,
    ).provider;
    const calls = [
      { id: "fc_7x2k", name: "weather", input: { city: "Paris" }, signature: "c2lnLUE=" },
      { id: "fc_9q4m", name: "weather", input: { city: "Rome" } },
    ];
    gemini3.script("gemini-3-flash", { kind: "turn", turn: { toolCalls: calls } });
    const question = { model: "three", tools: TOOL_CONVERSATION.tools, messages: TOOL_CONVERSATION.messages.slice(0, 2) };
    const answered = completionOf(await three.complete(question, signal())).choices[0]!.message.tool_calls!;
    const streamed = assemble((await drainStream(await three.complete({ ...question, stream: true }, signal()))).chunks).toolCalls;
    for (const toolCalls of [answered, streamed])
      expect(toolCalls.map((call) => call.id)).toEqual(["fc_7x2k__thought__c2lnLUE=", "fc_9q4m"]);

    gemini3.reset();
    const results = [
      { role: "tool", tool_call_id: answered[0]!.id, content: '{"temp":21}' },
      { role: "tool", tool_call_id: answered[1]!.id, content: "sunny" },
    ];
    await three.complete(
      { ...question, messages: [...question.messages, { role: "assistant", content: null, tool_calls: answered }, ...results] },
      signal(),
    );
    expect(gemini3.calls[0]!.body.contents.slice(1)).toEqual([
      {
        role: "model",
        parts: [
          { functionCall: { id: "fc_7x2k", name: "weather", args: { city: "Paris" } }, thoughtSignature: "c2lnLUE=" },
          { functionCall: { id: "fc_9q4m", name: "weather", args: { city: "Rome" } } },
        ],
      },
      {
        role: "user",
        parts: [
          { functionResponse: { id: "fc_7x2k", name: "weather", response: { temp: 21 } } },
          { functionResponse: { id: "fc_9q4m", name: "weather", response: { content: "sunny" } } },
        ],
      },
    ]);

    // Gemini 2.x gives calls no id: the one made up for the client is not sent back.
    upstream.script("gemini-2.5-flash", { kind: "turn", turn: { toolCalls: [calls[0]!] } });
    const made = completionOf(await provider.complete({ ...question, model: "flash" }, signal())).choices[0]!.message.tool_calls!;
    expect(made[0]!.id).toMatch(/^call_[0-9a-f]{24}__thought__c2lnLUE=$/);
    upstream.reset();
    await provider.complete(
      {
        ...question,
        model: "flash",
        messages: [
          ...question.messages,
          { role: "assistant", content: null, tool_calls: made },
          { ...results[0]!, tool_call_id: made[0]!.id },
        ],
      },
      signal(),
    );
    expect(upstream.calls[0]!.body.contents.slice(1)).toEqual([
      { role: "model", parts: [{ functionCall: { name: "weather", args: { city: "Paris" } }, thoughtSignature: "c2lnLUE=" }] },
      { role: "user", parts: [{ functionResponse: { name: "weather", response: { temp: 21 } } }] },
    ]);
  });

  it("relays a 4xx verbatim as not retryable, and marks 429 (its RetryInfo as the wait) and 503 retryable", async () => {
    const cases = [
      {
        status: 400,
        body: { error: { code: 400, message: "Invalid JSON payload", status: "INVALID_ARGUMENT" } },
        retryable: false,
        retryAfterMs: undefined,
      },
      {
        status: 429,
        body: {
          error: {
            code: 429,
            message: "Resource has been exhausted",
            status: "RESOURCE_EXHAUSTED",
            details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "7s" }],
          },
        },
        retryable: true,
        retryAfterMs: 7000,
      },
      {
        status: 503,
        body: { error: { code: 503, message: "The model is overloaded.", status: "UNAVAILABLE" } },
        retryable: true,
        retryAfterMs: undefined,
      },
    ];
    for (const item of cases) {
      upstream.script("gemini-2.5-flash", { kind: "error", status: item.status, body: item.body });
      for (const stream of [false, true]) {
        const error = await provider
          .complete({ model: "flash", stream, messages: [{ role: "user", content: "x" }] }, signal())
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ProviderError);
        expect(error).toMatchObject({
          code: "UPSTREAM",
          status: item.status,
          upstreamStatus: item.status,
          upstreamBody: item.body,
          retryable: item.retryable,
          message: item.body.error.message,
        });
        expect((error as ProviderError).retryAfterMs).toBe(item.retryAfterMs);
      }
    }
  });

  it("ends a stream cut before its finishReason with the cut error, and relays an in-stream error", async () => {
    upstream.script("gemini-2.5-flash", { kind: "cut", turn: { text: "a b c d" }, after: 2 });
    const cut = await drainStream(
      await provider.complete({ model: "flash", stream: true, messages: [{ role: "user", content: "x" }] }, signal()),
    );
    expect(assemble(cut.chunks).content).toBe("a b");
    expect(cut.error).toBeInstanceOf(ServiceError);
    expect(cut.error).toMatchObject({ code: "BAD_GATEWAY", message: expect.stringContaining("closed the stream early") });

    upstream.script("gemini-2.5-flash", { kind: "stream-error", turn: { text: "a b c d" }, after: 1 });
    const failed = await drainStream(
      await provider.complete({ model: "flash", stream: true, messages: [{ role: "user", content: "x" }] }, signal()),
    );
    expect(assemble(failed.chunks).content).toBe("a");
    expect(failed.error).toMatchObject({
      code: "UPSTREAM",
      status: 503,
      retryable: true,
      upstreamBody: { error: { status: "UNAVAILABLE" } },
    });
  });
});
