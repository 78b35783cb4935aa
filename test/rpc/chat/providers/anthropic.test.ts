import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ServiceError } from "../../../../rpc/errors.js";
import { ProviderError } from "../../../../rpc/chat/providers/provider-error.js";
import { createAnthropicUpstream } from "../../../../mocks/anthropic-upstream.js";
import { mockUpstreams } from "../../../helpers/mock-upstreams.js";
import { TOOL_CONVERSATION, assemble, completionOf, drainStream, providerFor } from "../../../helpers/providers.js";

/** The anthropic adapter against a mock speaking the Messages API (docs/providers.md). */

const BASE = "https://api.anthropic.test";
const upstream = createAnthropicUpstream(BASE);
const msw = mockUpstreams(...upstream.handlers);
const env = { ANTHROPIC_KEY: "sk-ant-test" };
const signal = () => new AbortController().signal;
let provider: ReturnType<typeof providerFor>["provider"];

beforeAll(async () => {
  await msw.listen();
  provider = providerFor(
    "claude",
    {
      provider: "anthropic",
      baseURL: msw.url(BASE),
      apiKeyEnv: "ANTHROPIC_KEY",
      upstreamModel: "claude-sonnet-4-5",
      maxOutputTokens: 1000,
      contextWindow: 200000,
    },
    env,
  ).provider;
});
afterAll(() => msw.close());
beforeEach(() => upstream.reset());

describe("anthropic adapter", () => {
  it("translates a JSON request and answer: system on top, max_tokens always, headers, usage and finish reason", async () => {
    upstream.script("claude-sonnet-4-5", {
      kind: "turn",
      turn: { text: "Bonjour le monde", finish: "length", usage: { input: 12, output: 3 } },
    });
    const completion = completionOf(
      await provider.complete(
        {
          model: "claude",
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: "Say hi" },
          ],
          temperature: 0.5,
          top_p: 0.9,
          stop: "END",
        },
        signal(),
        { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
      ),
    );
    expect(completion).toMatchObject({
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content: "Bonjour le monde" }, finish_reason: "length" }],
      usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 },
    });
    const [call] = upstream.calls;
    expect(call!.url.pathname).toBe("/v1/messages");
    expect(call!.headers.get("x-api-key")).toBe("sk-ant-test");
    expect(call!.headers.get("anthropic-version")).toBe("2023-06-01");
    expect(call!.headers.get("authorization")).toBeNull();
    expect(call!.headers.get("traceparent")).toBe("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    expect(call!.body).toEqual({
      model: "claude-sonnet-4-5",
      system: "Be brief.",
      messages: [{ role: "user", content: [{ type: "text", text: "Say hi" }] }],
      max_tokens: 1000,
      temperature: 0.5,
      top_p: 0.9,
      stop_sequences: ["END"],
    });
  });

  it("sends the request's max_tokens when it has one, and image parts as image blocks", async () => {
    await provider.complete(
      {
        model: "claude",
        max_tokens: 42,
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "What is this?" },
              { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
              { type: "image_url", image_url: { url: "https://example.test/cat.jpg" } },
            ],
          },
        ],
      },
      signal(),
    );
    expect(upstream.calls[0]!.body.max_tokens).toBe(42);
    expect(upstream.calls[0]!.body.messages[0].content).toEqual([
      { type: "text", text: "What is this?" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { type: "url", url: "https://example.test/cat.jpg" } },
    ]);
  });

  it("streams text as chat.completion.chunk frames: role first, finish reason, usage in the last frame", async () => {
    upstream.script("claude-sonnet-4-5", { kind: "turn", turn: { text: "one two three", usage: { input: 9, output: 3 } } });
    const { chunks, error } = await drainStream(
      await provider.complete({ model: "claude", stream: true, messages: [{ role: "user", content: "count" }] }, signal()),
    );
    expect(error).toBeUndefined();
    expect(upstream.calls[0]!.body).toMatchObject({ stream: true, max_tokens: 1000 });
    expect(upstream.calls[0]!.headers.get("accept")).toBe("text/event-stream");
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.id === "msg_1")).toBe(true);
    expect(chunks[0]!.choices![0]!.delta).toEqual({ role: "assistant", content: "one" });
    expect(assemble(chunks)).toMatchObject({ role: "assistant", content: "one two three", toolCalls: [], finish: "stop" });
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 } });
    expect(chunks.filter((chunk) => chunk.usage)).toHaveLength(1);
  });

  it("reads a stream to its end, so the connection goes back to the pool", async () => {
    const before = msw.acceptedConnections();
    for (let i = 0; i < 3; i++) {
      const { error } = await drainStream(
        await provider.complete({ model: "claude", stream: true, messages: [{ role: "user", content: `again ${i}` }] }, signal()),
      );
      expect(error).toBeUndefined();
    }
    expect(msw.acceptedConnections() - before).toBeLessThanOrEqual(1);
  });

  it("translates tools, tool_choice, assistant tool calls and tool results into tool_use / tool_result blocks", async () => {
    await provider.complete(
      {
        model: "claude",
        ...TOOL_CONVERSATION,
        tool_choice: { type: "function", function: { name: "weather" } },
        parallel_tool_calls: false,
      },
      signal(),
    );
    const body = upstream.calls[0]!.body;
    expect(body.system).toBe("Be brief.");
    expect(body.tools).toEqual([
      {
        name: "weather",
        description: "Current weather of a city",
        input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
      },
    ]);
    expect(body.tool_choice).toEqual({ type: "tool", name: "weather", disable_parallel_tool_use: true });
    expect(body.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "Weather in Paris and Rome?" }] },
      {
        role: "assistant",
        content: [
          { type: "tool_use", id: "call_1", name: "weather", input: { city: "Paris" } },
          { type: "tool_use", id: "call_2", name: "weather", input: { city: "Rome" } },
        ],
      },
      // Both results in one user turn, right after the calls.
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "call_1", content: '{"temp":21}' },
          { type: "tool_result", tool_use_id: "call_2", content: "sunny" },
        ],
      },
    ]);
    for (const [choice, expected] of [
      ["auto", { type: "auto" }],
      ["required", { type: "any" }],
      ["none", { type: "none" }],
    ] as const) {
      upstream.reset();
      await provider.complete({ model: "claude", ...TOOL_CONVERSATION, tool_choice: choice }, signal());
      expect(upstream.calls[0]!.body.tool_choice).toEqual(expected);
    }
  });

  it("answers a tool history sent without tools: the history's functions are declared and no new call is allowed", async () => {
    const { tools: _omitted, ...history } = TOOL_CONVERSATION;
    // Without the declaration the Messages API (and its mock) answers 400.
    const result = await provider.complete({ model: "claude", ...history, tool_choice: "required" }, signal());
    expect(completionOf(result).choices[0]!.finish_reason).toBe("stop");
    const body = upstream.calls[0]!.body;
    expect(body.tools).toEqual([
      { name: "weather", description: "Declared by the gateway for the conversation's earlier calls.", input_schema: { type: "object" } },
    ]);
    expect(body.tool_choice).toEqual({ type: "none" });
    expect(body.messages[1].content[0]).toEqual({ type: "tool_use", id: "call_1", name: "weather", input: { city: "Paris" } });

    // Results whose call is not in the history still get one declared tool.
    upstream.reset();
    await provider.complete(
      {
        model: "claude",
        messages: [
          { role: "user", content: "Hi" },
          { role: "tool", tool_call_id: "call_9", content: "42" },
        ],
      },
      signal(),
    );
    expect(upstream.calls[0]!.body.tools.map((tool: { name: string }) => tool.name)).toEqual(["tool"]);
    expect(upstream.calls[0]!.body.tool_choice).toEqual({ type: "none" });
  });

  it("answers tool_use blocks as tool_calls, as JSON and as streamed deltas", async () => {
    const turn = {
      text: "Let me check.",
      toolCalls: [
        { id: "toolu_01", name: "weather", input: { city: "Paris" } },
        { id: "toolu_02", name: "weather", input: { city: "Rome" } },
      ],
    };
    upstream.script("claude-sonnet-4-5", { kind: "turn", turn });
    const completion = completionOf(await provider.complete({ model: "claude", ...TOOL_CONVERSATION }, signal()));
    expect(completion.choices[0]).toEqual({
      index: 0,
      finish_reason: "tool_calls",
      message: {
        role: "assistant",
        content: "Let me check.",
        tool_calls: [
          { id: "toolu_01", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: "toolu_02", type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
        ],
      },
    });

    const { chunks, error } = await drainStream(await provider.complete({ model: "claude", stream: true, ...TOOL_CONVERSATION }, signal()));
    expect(error).toBeUndefined();
    const deltas = chunks.flatMap((chunk) => chunk.choices?.[0]?.delta?.tool_calls ?? []);
    // The first delta of a call carries its id and name; the arguments follow in pieces.
    expect(deltas[0]).toEqual({ index: 0, id: "toolu_01", type: "function", function: { name: "weather", arguments: "" } });
    expect(deltas.filter((delta) => delta.index === 0 && delta.function?.arguments).length).toBe(2);
    expect(assemble(chunks)).toMatchObject({
      content: "Let me check.",
      finish: "tool_calls",
      toolCalls: [
        { id: "toolu_01", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
        { id: "toolu_02", type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
      ],
    });
  });

  it("streams the arguments of a call to a tool without parameters as {}, as in a JSON answer", async () => {
    const turn = {
      toolCalls: [
        { id: "toolu_now", name: "current_time", input: {} },
        { id: "toolu_paris", name: "weather", input: { city: "Paris" } },
      ],
    };
    upstream.script("claude-sonnet-4-5", { kind: "turn", turn });
    const tools = [{ type: "function" as const, function: { name: "current_time" } }, ...TOOL_CONVERSATION.tools];
    const request = { model: "claude", tools, messages: [{ role: "user", content: "Time, and weather in Paris?" }] };
    const expected = [
      { id: "toolu_now", type: "function", function: { name: "current_time", arguments: "{}" } },
      { id: "toolu_paris", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
    ];
    expect(completionOf(await provider.complete(request, signal())).choices[0]!.message.tool_calls).toEqual(expected);
    const { chunks, error } = await drainStream(await provider.complete({ ...request, stream: true }, signal()));
    expect(error).toBeUndefined();
    expect(assemble(chunks)).toMatchObject({ finish: "tool_calls", toolCalls: expected });
  });

  it("relays a 4xx verbatim as not retryable, and marks 429 (with Retry-After), 529 and 5xx retryable", async () => {
    const cases: { status: number; type: string; headers: Record<string, string>; retryable: boolean; retryAfterMs: number | undefined }[] =
      [
        { status: 400, type: "invalid_request_error", headers: {}, retryable: false, retryAfterMs: undefined },
        { status: 401, type: "authentication_error", headers: {}, retryable: false, retryAfterMs: undefined },
        { status: 429, type: "rate_limit_error", headers: { "retry-after": "7" }, retryable: true, retryAfterMs: 7000 },
        { status: 529, type: "overloaded_error", headers: {}, retryable: true, retryAfterMs: undefined },
        { status: 500, type: "api_error", headers: {}, retryable: true, retryAfterMs: undefined },
      ];
    for (const item of cases) {
      const body = { type: "error", error: { type: item.type, message: `${item.type} happened` } };
      upstream.script("claude-sonnet-4-5", { kind: "error", status: item.status, body, headers: item.headers });
      for (const stream of [false, true]) {
        const error = await provider
          .complete({ model: "claude", stream, messages: [{ role: "user", content: "x" }] }, signal())
          .catch((e: unknown) => e);
        expect(error, `${item.status}`).toBeInstanceOf(ProviderError);
        expect(error).toMatchObject({
          code: "UPSTREAM",
          status: item.status,
          upstreamStatus: item.status,
          upstreamBody: body,
          retryable: item.retryable,
          message: `${item.type} happened`,
        });
        expect((error as ProviderError).retryAfterMs).toBe(item.retryAfterMs);
        // Spec 7.2: the upstream's headers (Retry-After) are not copied onto the response.
        expect((error as ProviderError).headers).toBeUndefined();
      }
    }
  });

  it("turns an error event in the stream into a retryable 529 error, and a cut stream into the cut error", async () => {
    upstream.script("claude-sonnet-4-5", { kind: "stream-error", turn: { text: "a b c" }, after: 2 });
    const failed = await drainStream(
      await provider.complete({ model: "claude", stream: true, messages: [{ role: "user", content: "x" }] }, signal()),
    );
    // Nothing was sent before the error: a router may still try elsewhere.
    expect(failed.chunks).toEqual([]);
    expect(failed.error).toMatchObject({
      code: "UPSTREAM",
      status: 529,
      retryable: true,
      upstreamBody: { type: "error", error: { type: "overloaded_error" } },
    });

    upstream.script("claude-sonnet-4-5", { kind: "cut", turn: { text: "a b c d" }, after: 5 });
    const cut = await drainStream(
      await provider.complete({ model: "claude", stream: true, messages: [{ role: "user", content: "x" }] }, signal()),
    );
    expect(assemble(cut.chunks).content).toBe("a b");
    expect(cut.error).toBeInstanceOf(ServiceError);
    expect(cut.error).toMatchObject({ code: "BAD_GATEWAY", status: 502, message: expect.stringContaining("closed the stream early") });
    expect(cut.chunks.some((chunk) => chunk.choices?.some((choice) => choice.finish_reason))).toBe(false);
  });

  it("answers 503 when the key's variable is unset, and a retryable 502 when the provider is unreachable", async () => {
    const unset = providerFor("claude", { provider: "anthropic", baseURL: msw.url(BASE), apiKeyEnv: "NOT_SET_ANYWHERE" }, {}).provider;
    expect(
      await unset.complete({ model: "claude", messages: [{ role: "user", content: "x" }] }, signal()).catch((e: unknown) => e),
    ).toMatchObject({ status: 503, retryable: false });
    const down = providerFor("claude", { provider: "anthropic", baseURL: "http://127.0.0.1:9" }, {}).provider;
    expect(
      await down.complete({ model: "claude", messages: [{ role: "user", content: "x" }] }, signal()).catch((e: unknown) => e),
    ).toMatchObject({ code: "BAD_GATEWAY", status: 502, retryable: true });
    expect(upstream.calls).toHaveLength(0);
  });
});
