import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type OpenAI from "openai";
import { createAnthropicUpstream } from "../../../mocks/anthropic-upstream.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { loopbackFetch, openaiClient, usageByModel, usageOf, twoCallers, type RegisteredUser } from "../../helpers/chat.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";

/**
 * The OpenAI Responses API dialect (docs/dialects.md "Responses") on the Gateway and Account
 * surfaces, with the official `openai` client's `responses.create`: JSON, streamed typed events
 * and a function call round trip, on the built-in echo model and on an Anthropic model behind
 * the gateway (msw speaking the Messages API), with usage checked against the gateway's
 * metering and the plan allowance. Two users of two tenants each see only their own usage.
 */

const ANTHROPIC = "https://api.anthropic.test";
const anthropic = createAnthropicUpstream(ANTHROPIC);
const msw = mockUpstreams(...anthropic.handlers);

let server: TestServer;
let alice: RegisteredUser;
let bob: RegisteredUser;
let gateway: OpenAI;
let account: OpenAI;

const tools: OpenAI.Responses.FunctionTool[] = [
  {
    type: "function",
    name: "get_weather",
    description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
    strict: true,
  },
];

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({
      models: {
        "echo-1": { provider: "echo" },
        claude: { provider: "anthropic", baseURL: msw.url(ANTHROPIC), upstreamModel: "claude-test", maxOutputTokens: 1000 },
      },
    }),
  });
  let bobKey: string;
  ({ alice, bob, bobKey } = await twoCallers(server, "responses"));
  gateway = openaiClient(server, "/gateway/v1", alice.token);
  account = openaiClient(server, "/account/v1", bobKey);
});

afterAll(async () => {
  await server?.close();
  await msw.close();
});

describe.each([
  ["Gateway", () => gateway, () => alice],
  ["Account", () => account, () => bob],
])("responses.create on the %s API", (_surface, client, owner) => {
  it("echo: JSON answer with output_text and usage, metered like a chat completion", async () => {
    const before = await usageOf(server, owner().token, "echo-1");
    const response = await client().responses.create({ model: "echo-1", input: "hello there responses", store: true });
    expect(response).toMatchObject({ object: "response", status: "completed", model: "echo-1", store: false });
    expect(response.output_text).toBe("hello there responses");
    expect(response.output).toEqual([
      expect.objectContaining({
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: "hello there responses", annotations: [], logprobs: [] }],
      }),
    ]);
    expect(response.usage).toMatchObject({ output_tokens: 3, total_tokens: response.usage!.input_tokens + 3 });
    const after = (await usageByModel(server, owner().token))["echo-1"]!;
    expect(after.requests - before.requests).toBe(1);
    expect(after.inputTokens - before.inputTokens).toBe(response.usage!.input_tokens);
    expect(after.outputTokens - before.outputTokens).toBe(3);
    expect(after.credits).toBe(0);
  });

  it("echo: instructions and input items become the conversation; max_output_tokens ends it incomplete", async () => {
    const response = await client().responses.create({
      model: "echo-1",
      instructions: "Be brief.",
      input: [
        { role: "user", content: [{ type: "input_text", text: "first question" }] },
        { role: "assistant", content: "an answer" },
        { role: "user", content: "one two three four five" },
      ],
      max_output_tokens: 2,
    });
    expect(response.status).toBe("incomplete");
    expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(response.output_text).toBe("one two");
  });

  it("echo: streamed as typed events, the last one response.completed with usage", async () => {
    const stream = await client().responses.create({ model: "echo-1", input: "stream these words", stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((event) => event.type);
    expect(types).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_event, index) => index));
    const deltas = events.flatMap((event) => (event.type === "response.output_text.delta" ? [event.delta] : []));
    expect(deltas.join("")).toBe("stream these words");
    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(completed.response.output_text ?? completed.response.output).toBeDefined();
    expect(completed.response.usage).toMatchObject({ output_tokens: 3 });
    expect(completed.response.output).toEqual([
      expect.objectContaining({ type: "message", content: [expect.objectContaining({ text: "stream these words" })] }),
    ]);
  });

  it("echo: a function call round trip (JSON, then streamed)", async () => {
    const first = await client().responses.create({
      model: "echo-1",
      input: '/tool get_weather {"city":"Oslo"}',
      tools,
      tool_choice: "auto",
    });
    const call = first.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toMatchObject({ type: "function_call", name: "get_weather", arguments: '{"city":"Oslo"}', status: "completed" });
    expect(call.call_id).toMatch(/^call_/);
    const second = await client().responses.create({
      model: "echo-1",
      tools,
      input: [
        { role: "user", content: '/tool get_weather {"city":"Oslo"}' },
        { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: "function_call_output", call_id: call.call_id, output: "sunny, 21 C" },
      ],
    });
    expect(second.output_text).toBe("sunny, 21 C");

    const stream = await client().responses.create({ model: "echo-1", input: "/tool get_weather {}", tools, stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((event) => event.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const done = events.find((event) => event.type === "response.output_item.done") as OpenAI.Responses.ResponseOutputItemDoneEvent;
    expect(done.item).toMatchObject({ type: "function_call", name: "get_weather", arguments: "{}" });
  });

  it("an Anthropic model answers a Responses request (JSON and streamed) with its own usage", async () => {
    anthropic.reset();
    anthropic.script("claude-test", { kind: "turn", turn: { text: "Bonjour from Claude", usage: { input: 17, output: 4 } } });
    const before = await usageOf(server, owner().token, "claude");
    const response = await client().responses.create({
      model: "claude",
      instructions: "Answer in French.",
      input: "Hello",
      temperature: 0.2,
    });
    expect(response.output_text).toBe("Bonjour from Claude");
    expect(response.usage).toMatchObject({ input_tokens: 17, output_tokens: 4, total_tokens: 21 });
    expect(anthropic.calls[0]!.body).toMatchObject({
      model: "claude-test",
      system: "Answer in French.",
      messages: [{ role: "user", content: [{ type: "text", text: "Hello" }] }],
      temperature: 0.2,
    });
    const stream = await client().responses.create({ model: "claude", input: "Hello", stream: true });
    let text = "";
    let usage: OpenAI.Responses.ResponseUsage | undefined;
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.completed") usage = event.response.usage;
    }
    expect(text).toBe("Bonjour from Claude");
    expect(usage).toMatchObject({ input_tokens: 17, output_tokens: 4 });
    const after = (await usageByModel(server, owner().token)).claude!;
    expect(after.requests - before.requests).toBe(2);
    expect(after.inputTokens - before.inputTokens).toBe(34);
    expect(after.outputTokens - before.outputTokens).toBe(8);
  });

  it("an Anthropic model's tool use is a function_call, and the function_call_output goes back as a tool_result", async () => {
    anthropic.reset();
    anthropic.script("claude-test", (_body, turn) =>
      turn === 0
        ? {
            kind: "turn",
            turn: { toolCalls: [{ id: "toolu_1", name: "get_weather", input: { city: "Paris" } }], usage: { input: 30, output: 6 } },
          }
        : { kind: "turn", turn: { text: "It is rainy in Paris", usage: { input: 40, output: 5 } } },
    );
    const first = await client().responses.create({ model: "claude", input: "weather in Paris?", tools, tool_choice: "required" });
    const call = first.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toMatchObject({ call_id: "toolu_1", name: "get_weather", arguments: '{"city":"Paris"}' });
    expect(anthropic.calls[0]!.body).toMatchObject({
      tools: [{ name: "get_weather", description: "Weather in a city", input_schema: tools[0]!.parameters }],
      tool_choice: { type: "any" },
    });
    const stream = await client().responses.create({
      model: "claude",
      tools,
      stream: true,
      input: [
        { role: "user", content: "weather in Paris?" },
        { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: "function_call_output", call_id: call.call_id, output: "rainy" },
      ],
    });
    let text = "";
    for await (const event of stream) if (event.type === "response.output_text.delta") text += event.delta;
    expect(text).toBe("It is rainy in Paris");
    expect(anthropic.calls[1]!.body.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "weather in Paris?" }] },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "rainy" }] },
    ]);
  });

  it("an Anthropic error inside the stream ends it with an error frame the client raises", async () => {
    anthropic.reset();
    anthropic.script("claude-test", { kind: "stream-error", turn: { text: "one two three four" }, after: 4 });
    const stream = await client().responses.create({ model: "claude", input: "x", stream: true });
    const seen: string[] = [];
    const error = await (async () => {
      for await (const event of stream) seen.push(event.type);
    })().catch((caught: unknown) => caught);
    expect(error).toMatchObject({ message: expect.stringContaining("Overloaded") });
    expect(seen).toContain("response.output_text.delta");
    expect(seen).not.toContain("response.completed");
  });

  it("is stateless: previous_response_id, conversation and item_reference are 400 with a clear message", async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ model: "echo-1", input: "x", previous_response_id: "resp_123" }, /does not store responses/],
      [{ model: "echo-1", input: "x", conversation: "conv_1" }, /does not store conversations/],
      [{ model: "echo-1", input: [{ type: "item_reference", id: "msg_1" }] }, /item_reference needs stored responses/],
      // A provider's own tool call is dropped when translating: nothing is left to answer.
      [{ model: "echo-1", input: [{ type: "web_search_call", id: "ws_1" }] }, /at least one message/],
      [{ model: "echo-1" }, /input/],
    ];
    for (const [body, message] of cases) {
      await expect(client().responses.create(body as never)).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(message),
      });
    }
  });
});

describe("Responses on the Account and Gateway surfaces", () => {
  it("malformed bodies are 400 in the surface's envelope, never a server error", async () => {
    const bodies: unknown[] = [
      {},
      { input: "x" },
      { model: "echo-1", input: 5 },
      { model: "echo-1", input: [] },
      { model: "echo-1", input: [5] },
      { model: "echo-1", input: [{ role: "wizard", content: "x" }] },
      { model: "echo-1", input: [{ role: "user", content: 5 }] },
      { model: "echo-1", input: [{ role: "user", content: [null] }] },
      { model: "echo-1", input: [{ role: "user", content: [{ type: "input_text", text: 5 }] }] },
      { model: "echo-1", input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }] },
      { model: "echo-1", input: [{ role: "user", content: [{ type: "input_file", file_data: "x" }] }] },
      { model: "echo-1", input: [{ type: "function_call", name: "f", arguments: "{}" }] },
      { model: "echo-1", input: [{ type: "function_call", call_id: "c", name: "bad name" }] },
      { model: "echo-1", input: [{ type: "function_call_output", output: "x" }] },
      { model: "echo-1", input: [{ type: "function_call_output", call_id: "c", output: 5 }] },
      { model: "echo-1", input: [{ role: "system", content: "only a system message" }] },
      { model: "echo-1", input: "x", tools: [{ type: "function", name: "f", parameters: "x" }] },
      { model: "echo-1", input: "x", tool_choice: "sometimes" },
      { model: "echo-1", input: "x", max_output_tokens: 0 },
      { model: "echo-1", input: "x", temperature: 3 },
      { model: "echo-1", input: "x", metadata: { a: 1 } },
    ];
    for (const json of bodies) {
      const res = await server.request("/gateway/v1/responses", { method: "POST", headers: bearer(alice.token), json });
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(res.body.error, JSON.stringify(json)).toMatchObject({ code: "VALIDATION_FAILED", message: expect.any(String) });
    }
  });

  it("the plan allowance is drawn by what the model used", async () => {
    const key = await server.request("/account/v1/keys", { method: "POST", headers: bearer(bob.token), json: { name: "plan" } });
    const models = async () => (await server.request("/account/v1/models", { headers: bearer(key.body.key) })).body.plan.used as number;
    const before = await models();
    const response = await account.responses.create({ model: "echo-1", input: "count me" });
    expect((await models()) - before).toBe(response.usage!.total_tokens);
  });

  it("needs the intelligence scope on the Account API, and credentials everywhere, in the surface's envelope", async () => {
    const compute = await server.request("/account/v1/keys", {
      method: "POST",
      headers: bearer(bob.token),
      json: { name: "compute only", scopes: ["compute"] },
    });
    const refused = await server.request("/account/v1/responses", {
      method: "POST",
      headers: bearer(compute.body.key),
      json: { model: "echo-1", input: "x" },
    });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: "INSUFFICIENT_CAPABILITY" });
    const anonymous = await server.request("/gateway/v1/responses", { method: "POST", json: { model: "echo-1", input: "x" } });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error).toMatchObject({ code: "UNAUTHORIZED" });
    const unknown = await server.request("/gateway/v1/responses", {
      method: "POST",
      headers: bearer(alice.token),
      json: { model: "nope", input: "x" },
    });
    expect(unknown.status).toBe(403);
  });

  it("two users of two tenants: each tenant's usage holds its own requests only", async () => {
    const carol = await registerUser(server);
    const dave = await registerUser(server);
    expect(carol.user.tenantId).not.toBe(dave.user.tenantId);
    const carolClient = openaiClient(server, "/gateway/v1", carol.token);
    await carolClient.responses.create({ model: "echo-1", input: "carol only" });
    await carolClient.responses.create({ model: "echo-1", input: "carol again", stream: true }).then(async (stream) => {
      for await (const _event of stream);
    });
    expect((await usageByModel(server, carol.token))["echo-1"]).toMatchObject({ requests: 2 });
    expect(await usageByModel(server, dave.token)).toEqual({});
    // Dave naming Carol's tenant gets the 404 of a tenant that does not exist.
    const crossing = await server.request(`/gateway/v1/usage/models?tenantId=${carol.user.tenantId}`, { headers: bearer(dave.token) });
    const missing = await server.request("/gateway/v1/usage/models?tenantId=tnt_missing", { headers: bearer(dave.token) });
    expect(crossing.status).toBe(404);
    expect(crossing.body.error.message).toBe(missing.body.error.message.replace("tnt_missing", carol.user.tenantId));
  });

  it("is in the OpenAPI document as a declared method with its errors", async () => {
    const doc = (await server.request("/openapi.json")).body;
    for (const path of ["/gateway/v1/responses", "/account/v1/responses"]) {
      const op = doc.paths[path].post;
      expect(op["x-jsonrpc-method"]).toMatch(/^(gateway|account)\.responses\.create$/);
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(["200", "400", "401", "403", "429", "502", "503"]));
      expect(op.responses["200"].content["text/event-stream"]).toBeDefined();
    }
  });

  it("a stream the client drops is settled and frees its place", async () => {
    const res = await loopbackFetch(server.url("/gateway/v1/responses"), {
      method: "POST",
      headers: { ...bearer(alice.token), "content-type": "application/json" },
      body: JSON.stringify({ model: "echo-1", input: "one two three four five six seven", stream: true }),
    });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toMatch(/^event: response\.created\ndata: /);
    await reader.cancel();
    // The next request is served: the place and the hold were given back.
    const next = await gateway.responses.create({ model: "echo-1", input: "after" });
    expect(next.output_text).toBe("after");
  });
});
