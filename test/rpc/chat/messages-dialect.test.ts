import { afterAll, beforeAll, describe, expect, it } from "vitest";
import Anthropic from "@anthropic-ai/sdk";
import { createOpenAiChatUpstream } from "../../../mocks/openai-chat-upstream.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { loopbackFetch, usageByModel, usageOf, twoCallers, type RegisteredUser } from "../../helpers/chat.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";

/**
 * The Anthropic Messages API dialect (docs/dialects.md "Messages") on the Gateway and Account
 * surfaces, with the official `@anthropic-ai/sdk`: `messages.create` JSON and streamed, a tool
 * use round trip and `countTokens`, on the built-in echo model and on an OpenAI-compatible
 * model behind the gateway (msw speaking chat completions), with usage checked against the
 * gateway's metering. Errors come in Anthropic's envelope with its statuses (529 overloaded).
 */

const OPENAI = "https://api.openai.test/v1";
const openai = createOpenAiChatUpstream(OPENAI);
const msw = mockUpstreams(...openai.handlers);

let server: TestServer;
let alice: RegisteredUser;
let bob: RegisteredUser;
let bobKey: string;

/** The SDK's base URL is the surface's origin and prefix: it appends `/v1/messages` (docs/dialects.md). */
const client = (prefix: string, credentials: { apiKey?: string; authToken?: string }) =>
  new Anthropic({
    apiKey: credentials.apiKey ?? null,
    authToken: credentials.authToken ?? null,
    baseURL: server.url(prefix),
    maxRetries: 0,
    timeout: 15_000,
    fetch: loopbackFetch,
  });

const tools: Anthropic.Tool[] = [
  {
    name: "get_weather",
    description: "Weather in a city",
    input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
];

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({
      models: {
        "echo-1": { provider: "echo" },
        gpt: { provider: "openai-compatible", baseURL: msw.url(OPENAI), upstreamModel: "gpt-test" },
        flaky: { provider: "openai-compatible", baseURL: msw.url(OPENAI), upstreamModel: "gpt-flaky", retries: 0, fallbacks: ["echo-1"] },
        busy: { provider: "openai-compatible", baseURL: msw.url(OPENAI), upstreamModel: "gpt-busy", retries: 0 },
      },
    }),
  });
  ({ alice, bob, bobKey } = await twoCallers(server, "messages"));
});

afterAll(async () => {
  await server?.close();
  await msw.close();
});

describe.each([
  // A session token as Claude Code's ANTHROPIC_AUTH_TOKEN sends it (Authorization: Bearer).
  ["Gateway", () => client("/gateway", { authToken: alice.token }), () => alice],
  // A personal key in x-api-key, as the SDK's apiKey sends it.
  ["Account", () => client("/account", { apiKey: bobKey }), () => bob],
])("messages on the %s API", (_surface, anthropic, owner) => {
  it("echo: messages.create answers a message with usage, metered like a chat completion", async () => {
    const before = await usageOf(server, owner().token, "echo-1");
    const message = await anthropic().messages.create({
      model: "echo-1",
      max_tokens: 100,
      system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
      messages: [{ role: "user", content: "hello there claude" }],
    });
    expect(message).toMatchObject({
      type: "message",
      role: "assistant",
      model: "echo-1",
      content: [{ type: "text", text: "hello there claude" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { output_tokens: 3 },
    });
    const after = (await usageByModel(server, owner().token))["echo-1"]!;
    expect(after.requests - before.requests).toBe(1);
    expect(after.inputTokens - before.inputTokens).toBe(message.usage.input_tokens);
    expect(after.outputTokens - before.outputTokens).toBe(3);
    expect(after.credits).toBe(0);
  });

  it("echo: max_tokens ends the message with stop_reason max_tokens", async () => {
    const message = await anthropic().messages.create({
      model: "echo-1",
      max_tokens: 2,
      messages: [{ role: "user", content: [{ type: "text", text: "one two three four" }] }],
    });
    expect(message.content).toEqual([{ type: "text", text: "one two" }]);
    expect(message.stop_reason).toBe("max_tokens");
  });

  it("echo: streamed as Anthropic's event sequence; the SDK's stream helper assembles it", async () => {
    const stream = await anthropic().messages.create({
      model: "echo-1",
      max_tokens: 100,
      stream: true,
      messages: [{ role: "user", content: "stream these words" }],
    });
    const events: Anthropic.RawMessageStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((event) => event.type)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const delta = events.find((event) => event.type === "message_delta") as Anthropic.RawMessageDeltaEvent;
    expect(delta.delta.stop_reason).toBe("end_turn");
    expect(delta.usage.output_tokens).toBe(3);

    const final = await anthropic()
      .messages.stream({ model: "echo-1", max_tokens: 100, messages: [{ role: "user", content: "assembled by the sdk" }] })
      .finalMessage();
    expect(final.content).toEqual([{ type: "text", text: "assembled by the sdk" }]);
    expect(final.usage).toMatchObject({ output_tokens: 4 });
    expect(final.usage.input_tokens).toBeGreaterThan(0);
  });

  it("echo: a tool use round trip (JSON, then streamed)", async () => {
    const first = await anthropic().messages.create({
      model: "echo-1",
      max_tokens: 100,
      tools,
      tool_choice: { type: "auto" },
      messages: [{ role: "user", content: '/tool get_weather {"city":"Oslo"}' }],
    });
    expect(first.stop_reason).toBe("tool_use");
    const use = first.content.find((block) => block.type === "tool_use") as Anthropic.ToolUseBlock;
    expect(use).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Oslo" } });
    const second = await anthropic().messages.create({
      model: "echo-1",
      max_tokens: 100,
      tools,
      messages: [
        { role: "user", content: '/tool get_weather {"city":"Oslo"}' },
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: [{ type: "text", text: "sunny, 21 C" }] }] },
      ],
    });
    expect(second.content).toEqual([{ type: "text", text: "sunny, 21 C" }]);
    expect(second.stop_reason).toBe("end_turn");

    const streamed = await anthropic()
      .messages.stream({
        model: "echo-1",
        max_tokens: 100,
        tools,
        messages: [{ role: "user", content: '/tool get_weather {"city":"Rome"}' }],
      })
      .finalMessage();
    expect(streamed.stop_reason).toBe("tool_use");
    expect(streamed.content).toEqual([expect.objectContaining({ type: "tool_use", name: "get_weather", input: { city: "Rome" } })]);
  });

  it("countTokens gives the input tokens the service counts, the same a message then reports on echo", async () => {
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "how many tokens is this" }];
    const counted = await anthropic().messages.countTokens({ model: "echo-1", system: "Be brief.", messages });
    const message = await anthropic().messages.create({ model: "echo-1", max_tokens: 50, system: "Be brief.", messages });
    expect(counted.input_tokens).toBe(message.usage.input_tokens);
    const withTools = await anthropic().messages.countTokens({ model: "echo-1", system: "Be brief.", messages, tools });
    expect(withTools.input_tokens).toBeGreaterThan(counted.input_tokens);
    await expect(anthropic().messages.countTokens({ model: "nope", messages })).rejects.toMatchObject({ status: 403 });
  });

  it("an OpenAI-compatible model answers a Messages request (JSON and streamed) with its own usage", async () => {
    openai.reset();
    openai.script("gpt-test", { kind: "turn", turn: { text: "Hi from GPT", usage: { input: 21, output: 3 } } });
    const before = await usageOf(server, owner().token, "gpt");
    const message = await anthropic().messages.create({
      model: "gpt",
      max_tokens: 64,
      system: "You are terse.",
      stop_sequences: ["END"],
      messages: [{ role: "user", content: "Hello" }],
    });
    expect(message.content).toEqual([{ type: "text", text: "Hi from GPT" }]);
    expect(message.usage).toMatchObject({ input_tokens: 21, output_tokens: 3 });
    expect(openai.calls[0]!.body).toMatchObject({
      model: "gpt-test",
      max_tokens: 64,
      stop: ["END"],
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Hello" },
      ],
    });
    const final = await anthropic()
      .messages.stream({ model: "gpt", max_tokens: 64, messages: [{ role: "user", content: "Hello" }] })
      .finalMessage();
    expect(final.content).toEqual([{ type: "text", text: "Hi from GPT" }]);
    expect(final.usage).toMatchObject({ input_tokens: 21, output_tokens: 3 });
    const after = (await usageByModel(server, owner().token)).gpt!;
    expect(after.requests - before.requests).toBe(2);
    expect(after.inputTokens - before.inputTokens).toBe(42);
    expect(after.outputTokens - before.outputTokens).toBe(6);
  });

  it("an OpenAI-compatible model's tool calls are tool_use blocks, and tool_result blocks go back as tool messages", async () => {
    openai.reset();
    openai.script("gpt-test", (_body, turn) =>
      turn === 0
        ? { kind: "turn", turn: { toolCalls: [{ id: "call_up_1", name: "get_weather", input: { city: "Paris" } }] } }
        : { kind: "turn", turn: { text: "It is rainy" } },
    );
    const first = await anthropic()
      .messages.stream({
        model: "gpt",
        max_tokens: 64,
        tools,
        tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
        messages: [{ role: "user", content: "weather?" }],
      })
      .finalMessage();
    expect(first.stop_reason).toBe("tool_use");
    expect(first.content).toEqual([{ type: "tool_use", id: "call_up_1", name: "get_weather", input: { city: "Paris" } }]);
    expect(openai.calls[0]!.body).toMatchObject({
      tools: [
        { type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: tools[0]!.input_schema } },
      ],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
    });
    const answer = await anthropic().messages.create({
      model: "gpt",
      max_tokens: 64,
      tools,
      messages: [
        { role: "user", content: "weather?" },
        { role: "assistant", content: first.content as Anthropic.ContentBlockParam[] },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "call_up_1", content: "rainy" },
            { type: "text", text: "so?" },
          ],
        },
      ],
    });
    expect(answer.content).toEqual([{ type: "text", text: "It is rainy" }]);
    expect(openai.calls[1]!.body.messages).toEqual([
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_up_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
      },
      { role: "tool", tool_call_id: "call_up_1", content: "rainy" },
      { role: "user", content: "so?" },
    ]);
  });

  it("an upstream error inside the stream ends it with an error event in Anthropic's envelope", async () => {
    openai.reset();
    openai.script("gpt-test", { kind: "stream-error", turn: { text: "one two three four" }, after: 3 });
    const stream = await anthropic().messages.create({
      model: "gpt",
      max_tokens: 20,
      stream: true,
      messages: [{ role: "user", content: "x" }],
    });
    const seen: string[] = [];
    const error = await (async () => {
      for await (const event of stream) seen.push(event.type);
    })().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect((error as InstanceType<typeof Anthropic.APIError>).error).toEqual({
      type: "error",
      error: { type: "api_error", message: expect.stringContaining("server had an error") },
    });
    expect(seen.slice(0, 3)).toEqual(["message_start", "content_block_start", "content_block_delta"]);
    expect(seen).not.toContain("message_stop");
  });

  it("retries and fallbacks apply: a failing model falls back to another one", async () => {
    openai.reset();
    openai.script("gpt-flaky", { kind: "error", status: 500, body: { error: { message: "boom", type: "server_error" } } });
    const message = await anthropic().messages.create({
      model: "flaky",
      max_tokens: 20,
      messages: [{ role: "user", content: "fell back" }],
    });
    expect(message.content).toEqual([{ type: "text", text: "fell back" }]);
    expect(openai.calls).toHaveLength(1);
  });

  it("errors are in Anthropic's envelope with its statuses: 400, 401, 403, 529 overloaded", async () => {
    const bad = anthropic().messages.create({ model: "echo-1", messages: [{ role: "user", content: "x" }] } as never);
    await expect(bad).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    const raw = await server.request(`/${_surface.toLowerCase()}/v1/messages`, {
      method: "POST",
      headers: _surface === "Gateway" ? bearer(alice.token) : { "x-api-key": bobKey, "anthropic-version": "2023-06-01" },
      json: { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: [{ type: "document", source: {} }] }] },
    });
    expect(raw.status).toBe(400);
    expect(raw.body).toEqual({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("document") } });

    const anonymous = await server.request(`/${_surface.toLowerCase()}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": "sk_wrong" },
      json: { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: "x" }] },
    });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toMatchObject({ type: "error", error: { type: "authentication_error" } });

    await expect(
      anthropic().messages.create({ model: "nope", max_tokens: 5, messages: [{ role: "user", content: "x" }] }),
    ).rejects.toMatchObject({ status: 403, error: { type: "error", error: { type: "permission_error" } } });

    openai.reset();
    openai.script("gpt-busy", {
      kind: "error",
      status: 503,
      body: { error: { message: "The engine is overloaded", type: "server_error" } },
    });
    const overloaded = await server.request(`/${_surface.toLowerCase()}/v1/messages`, {
      method: "POST",
      headers: _surface === "Gateway" ? bearer(alice.token) : { "x-api-key": bobKey },
      json: { model: "busy", max_tokens: 5, messages: [{ role: "user", content: "x" }] },
    });
    expect(overloaded.status).toBe(529);
    expect(overloaded.body).toEqual({ type: "error", error: { type: "overloaded_error", message: expect.stringContaining("overloaded") } });
  });
});

describe("Messages on the Account and Gateway surfaces", () => {
  it("malformed bodies are 400 invalid_request_error, never a server error", async () => {
    const user = [{ role: "user", content: "x" }];
    const bodies: unknown[] = [
      {},
      { model: "echo-1", max_tokens: 5 },
      { model: "echo-1", max_tokens: 0, messages: user },
      { model: "echo-1", max_tokens: 5, messages: [] },
      { model: "echo-1", max_tokens: 5, messages: [{ role: "system", content: "x" }] },
      { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: 5 }] },
      { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: [5] }] },
      { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: [{ type: "text", text: 5 }] }] },
      { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: [{ type: "image", source: { type: "file" } }] }] },
      { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: [{ type: "tool_result", content: "no id" }] }] },
      { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: 7 }] }] },
      {
        model: "echo-1",
        max_tokens: 5,
        messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: [null] }] }],
      },
      { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] }] },
      { model: "echo-1", max_tokens: 5, messages: [{ role: "assistant", content: [{ type: "tool_use", id: "t", name: "bad name" }] }] },
      { model: "echo-1", max_tokens: 5, messages: user, system: [{ type: "image" }] },
      { model: "echo-1", max_tokens: 5, messages: user, tools: [{ name: "f", input_schema: "x" }] },
      { model: "echo-1", max_tokens: 5, messages: user, tools: [{ name: "f" }], tool_choice: { type: "tool" } },
      { model: "echo-1", max_tokens: 5, messages: user, tool_choice: { type: "sometimes" } },
    ];
    for (const json of bodies) {
      for (const path of ["/gateway/v1/messages", "/gateway/v1/messages/count_tokens"]) {
        const res = await server.request(path, { method: "POST", headers: bearer(alice.token), json });
        if (path.endsWith("count_tokens") && res.status === 200) continue;
        expect(res.status, `${path} ${JSON.stringify(json)}`).toBe(400);
        expect(res.body, JSON.stringify(json)).toEqual({
          type: "error",
          error: { type: "invalid_request_error", message: expect.any(String) },
        });
      }
    }
    const notJson = await server.request("/gateway/v1/messages", { method: "POST", headers: bearer(alice.token), body: "{nope" });
    expect(notJson.status).toBe(400);
    expect(notJson.body.type).toBe("error");
  });

  it("the SSE frames carry Anthropic's event names, a ping after message_start, and no [DONE]", async () => {
    const res = await loopbackFetch(server.url("/gateway/v1/messages"), {
      method: "POST",
      headers: { ...bearer(alice.token), "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "echo-1", max_tokens: 10, stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const frames = (await res.text()).trim().split("\n\n");
    expect(frames.map((frame) => frame.split("\n")[0])).toEqual([
      "event: message_start",
      "event: ping",
      "event: content_block_start",
      "event: content_block_delta",
      "event: content_block_stop",
      "event: message_delta",
      "event: message_stop",
    ]);
    for (const frame of frames) {
      const [event, data] = frame.split("\n");
      expect(JSON.parse(data!.slice("data: ".length)).type).toBe(event!.slice("event: ".length));
    }
  });

  it("the Account API takes the personal key as a bearer token too, and needs the intelligence scope", async () => {
    const viaBearer = await client("/account", { authToken: bobKey }).messages.create({
      model: "echo-1",
      max_tokens: 10,
      messages: [{ role: "user", content: "bearer works" }],
    });
    expect(viaBearer.content).toEqual([{ type: "text", text: "bearer works" }]);
    const compute = await server.request("/account/v1/keys", {
      method: "POST",
      headers: bearer(bob.token),
      json: { name: "c", scopes: ["compute"] },
    });
    const refused = await server.request("/account/v1/messages", {
      method: "POST",
      headers: { "x-api-key": compute.body.key },
      json: { model: "echo-1", max_tokens: 5, messages: [{ role: "user", content: "x" }] },
    });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ type: "error", error: { type: "permission_error" } });
    // Chat completions on the Account API keep reading the bearer key only.
    const chat = await server.request("/account/v1/chat/completions", {
      method: "POST",
      headers: { "x-api-key": bobKey },
      json: { model: "echo-1", messages: [{ role: "user", content: "x" }] },
    });
    expect(chat.status).toBe(401);
  });

  it("two users of two tenants: each tenant's usage holds its own messages only", async () => {
    const carol = await registerUser(server);
    const dave = await registerUser(server);
    expect(carol.user.tenantId).not.toBe(dave.user.tenantId);
    const carolClient = client("/gateway", { authToken: carol.token });
    await carolClient.messages.create({ model: "echo-1", max_tokens: 10, messages: [{ role: "user", content: "carol" }] });
    await carolClient.messages.stream({ model: "echo-1", max_tokens: 10, messages: [{ role: "user", content: "carol" }] }).finalMessage();
    await carolClient.messages.countTokens({ model: "echo-1", messages: [{ role: "user", content: "not metered" }] });
    expect((await usageByModel(server, carol.token))["echo-1"]).toMatchObject({ requests: 2 });
    expect(await usageByModel(server, dave.token)).toEqual({});
    const crossing = await server.request(`/gateway/v1/usage/models?tenantId=${carol.user.tenantId}`, { headers: bearer(dave.token) });
    expect(crossing.status).toBe(404);
  });

  it("is in the OpenAPI document with Anthropic's error schema, x-api-key and the anthropic-version header", async () => {
    const doc = (await server.request("/openapi.json")).body;
    for (const surface of ["gateway", "account"]) {
      const op = doc.paths[`/${surface}/v1/messages`].post;
      expect(op["x-jsonrpc-method"]).toBe(`${surface}.messages.create`);
      expect(op.responses["529"].content["application/json"].schema.$ref).toBe("#/components/schemas/AnthropicError");
      expect(op.responses["400"].content["application/json"].schema.$ref).toBe("#/components/schemas/AnthropicError");
      expect(op.security).toEqual(expect.arrayContaining([{ apiKeyHeader: [] }]));
      expect(op.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: "anthropic-version", in: "header" })]));
      expect(doc.paths[`/${surface}/v1/messages/count_tokens`].post["x-jsonrpc-method"]).toBe(`${surface}.messages.count_tokens`);
    }
  });
});
