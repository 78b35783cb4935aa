import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type OpenAI from "openai";
import { http, HttpResponse } from "msw";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { openaiClient, platformAccount } from "../../helpers/chat.js";
import { serveMockUpstreams, type MockUpstreams } from "../../helpers/mock-upstreams.js";

/**
 * Function calling on the Account and Gateway surfaces (docs/models-and-chat.md "Tool calls")
 * with the official client: the built-in echo model offline, and an OpenAI-compatible upstream
 * that answers with tool calls, JSON and streamed. The Platform API forwards its six fields only.
 */

const UPSTREAM = "http://tools.upstream.test/v1";
const received: Record<string, any>[] = [];
const encoder = new TextEncoder();

/** An upstream that asks for `get_weather` until it gets a tool result, then answers with it. */
const handler = http.post(`${UPSTREAM}/chat/completions`, async ({ request }) => {
  const body = (await request.json()) as Record<string, any>;
  received.push(body);
  const last = body.messages.at(-1);
  const usage = { prompt_tokens: 20, completion_tokens: 7, total_tokens: 27 };
  const call = { id: "call_up_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } };
  if (!body.stream) {
    const message =
      last.role === "tool"
        ? { role: "assistant", content: `It is ${last.content}` }
        : { role: "assistant", content: null, tool_calls: body.tools ? [call] : undefined };
    return HttpResponse.json({
      id: "up",
      object: "chat.completion",
      created: 1,
      model: body.model,
      choices: [{ index: 0, message, finish_reason: last.role === "tool" || !body.tools ? "stop" : "tool_calls" }],
      usage,
    });
  }
  const frame = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ id: "up", object: "chat.completion.chunk", created: 1, model: body.model, choices, ...extra })}\n\n`;
  const frames = [
    frame([
      {
        index: 0,
        delta: {
          role: "assistant",
          content: null,
          tool_calls: [{ index: 0, id: "call_up_1", type: "function", function: { name: "get_weather", arguments: "" } }],
        },
        finish_reason: null,
      },
    ]),
    frame([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }, finish_reason: null }]),
    frame([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }, finish_reason: null }]),
    frame([{ index: 0, delta: {}, finish_reason: "tool_calls" }]),
    frame([], { usage }),
    "data: [DONE]\n\n",
  ];
  return new HttpResponse(
    new ReadableStream({
      start: (controller) => {
        for (const f of frames) controller.enqueue(encoder.encode(f));
        controller.close();
      },
    }),
    { headers: { "content-type": "text/event-stream" } },
  );
});

let msw: MockUpstreams;
let server: TestServer;
let gateway: OpenAI;
let account: OpenAI;
let platform: OpenAI;
let gatewayToken: string;
let accountKey: string;
let platformKey: string;

const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

beforeAll(async () => {
  msw = await serveMockUpstreams(handler);
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({
      models: {
        echo: { provider: "echo" },
        remote: { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), upstreamModel: "tool-model" },
      },
    }),
  });
  const user = await registerUser(server);
  gatewayToken = user.token;
  gateway = openaiClient(server, "/gateway/v1", user.token);
  const key = await server.request("/account/v1/keys", { method: "POST", headers: bearer(user.token), json: { name: "tools" } });
  accountKey = key.body.key;
  account = openaiClient(server, "/account/v1", accountKey);
  const owner = await platformAccount(server, 10);
  platformKey = owner.key;
  platform = openaiClient(server, "/api/v1", platformKey);
});
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
  await msw.close();
});

describe.each([
  ["Gateway", () => gateway],
  ["Account", () => account],
])("tool calls on the %s API", (_surface, client) => {
  it("echo: a /tool directive becomes a tool call, and the tool result is answered (JSON)", async () => {
    const first = await client().chat.completions.create({
      model: "echo",
      messages: [{ role: "user", content: '/tool get_weather {"city":"Oslo"}' }],
      tools,
      tool_choice: "auto",
    });
    const call = first.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
    expect(first.choices[0]!.finish_reason).toBe("tool_calls");
    expect(call).toMatchObject({ type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } });
    const second = await client().chat.completions.create({
      model: "echo",
      tools,
      messages: [
        { role: "user", content: '/tool get_weather {"city":"Oslo"}' },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" },
      ],
    });
    expect(second.choices[0]!.message.content).toBe("sunny, 21 C");
    expect(second.choices[0]!.finish_reason).toBe("stop");
  });

  it("echo: streamed tool call", async () => {
    const stream = await client().chat.completions.create({
      model: "echo",
      stream: true,
      messages: [{ role: "user", content: "/tool get_weather {}" }],
      tools,
    });
    const calls: unknown[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      calls.push(...(chunk.choices[0]?.delta?.tool_calls ?? []));
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(calls).toEqual([expect.objectContaining({ index: 0, type: "function", function: { name: "get_weather", arguments: "{}" } })]);
    expect(finish).toBe("tool_calls");
  });

  it("an upstream model receives tools, tool_choice, parallel_tool_calls, tool_calls and tool_call_id, and its tool calls come back (JSON and streamed)", async () => {
    received.length = 0;
    const first = await client().chat.completions.create({
      model: "remote",
      messages: [{ role: "user", content: "weather?" }],
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
    });
    expect(first.choices[0]!.message.tool_calls).toEqual([
      { id: "call_up_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
    ]);
    expect(received[0]).toMatchObject({
      model: "tool-model",
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
    });
    const answer = await client().chat.completions.create({
      model: "remote",
      tools,
      messages: [
        { role: "user", content: "weather?" },
        { role: "assistant", content: null, tool_calls: first.choices[0]!.message.tool_calls! },
        { role: "tool", tool_call_id: "call_up_1", content: "rainy" },
      ],
    });
    expect(answer.choices[0]!.message.content).toBe("It is rainy");
    expect(received[1]!.messages).toEqual([
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_up_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
      },
      { role: "tool", content: "rainy", tool_call_id: "call_up_1" },
    ]);

    const stream = await client().chat.completions.create({
      model: "remote",
      stream: true,
      messages: [{ role: "user", content: "weather?" }],
      tools,
    });
    let args = "";
    let name = "";
    for await (const chunk of stream) {
      for (const delta of chunk.choices[0]?.delta?.tool_calls ?? []) {
        name += delta.function?.name ?? "";
        args += delta.function?.arguments ?? "";
      }
    }
    expect(name).toBe("get_weather");
    expect(JSON.parse(args)).toEqual({ city: "Paris" });
  });

  it("bad tool fields and unknown roles get 400 in the surface's envelope", async () => {
    const base = _surface === "Gateway" ? "/gateway/v1" : "/account/v1";
    const token = _surface === "Gateway" ? gatewayToken : accountKey;
    const post = (json: unknown) => server.request(`${base}/chat/completions`, { method: "POST", headers: bearer(token), json });
    for (const json of [
      { model: "echo", messages: [{ role: "function", content: "x" }] },
      { model: "echo", messages: [{ role: "tool", content: "no id" }] },
      { model: "echo", messages: [{ role: "user" }] },
      { model: "echo", messages: [{ role: "user", content: "x" }], tools: [{ type: "function", function: { name: "has space" } }] },
      { model: "echo", messages: [{ role: "user", content: "x" }], tools: "get_weather" },
      { model: "echo", messages: [{ role: "user", content: "x" }], tool_choice: "always" },
      {
        model: "echo",
        messages: [{ role: "user", content: "x", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }] }],
      },
    ]) {
      const res = await post(json);
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(res.body.error).toBeDefined();
    }
  });
});

describe("the Platform API", () => {
  it("forwards its six fields only: tools are dropped, the upstream sees {role, content} messages", async () => {
    received.length = 0;
    const answer = await platform.chat.completions.create({
      model: "remote",
      messages: [{ role: "user", content: "weather?" }],
      tools,
      tool_choice: "required",
      parallel_tool_calls: true,
    });
    expect(answer.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(Object.keys(received[0]!).sort()).toEqual(["messages", "model"]);
    const echo = await platform.chat.completions.create({
      model: "echo",
      messages: [{ role: "user", content: "/tool get_weather {}" }],
      tools,
    });
    expect(echo.choices[0]!.message.content).toBe("/tool get_weather {}");
    expect(echo.choices[0]!.message.tool_calls ?? []).toEqual([]);
  });

  it("a role outside system, user, assistant and tool is 400 in the Platform envelope", async () => {
    const res = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(platformKey),
      json: { model: "echo", messages: [{ role: "wizard", content: "x" }] },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", message: expect.stringContaining("role") });
  });
});
