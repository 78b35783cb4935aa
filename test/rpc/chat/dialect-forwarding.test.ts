import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { http, HttpResponse } from "msw";
import { createAnthropicUpstream } from "../../../mocks/anthropic-upstream.js";
import { createOpenAiChatUpstream } from "../../../mocks/openai-chat-upstream.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * docs/dialects.md "How a request travels": a request to an upstream of its own dialect goes as
 * the client sent it, with only the model id changed, and the upstream's answer comes back as
 * it sent it; to any other upstream it is translated, and what cannot be carried is named in
 * `X-Service-Warning`, never dropped silently.
 */

const OPENAI = "https://api.openai.test/v1";
const ANTHROPIC = "https://api.anthropic.test";
const openai = createOpenAiChatUpstream(OPENAI);
const anthropic = createAnthropicUpstream(ANTHROPIC);
const msw = mockUpstreams(...openai.handlers, ...anthropic.handlers);

let server: TestServer;
let token: string;

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("FWD_KEY", "sk-forwarding");
  const models = {
    gpt: { provider: "openai-compatible", baseURL: msw.url(OPENAI), apiKeyEnv: "FWD_KEY", upstreamModel: "gpt-up" },
    claude: { provider: "anthropic", baseURL: msw.url(ANTHROPIC), apiKeyEnv: "FWD_KEY", upstreamModel: "claude-up" },
    "gpt-plain": {
      provider: "openai-compatible",
      baseURL: msw.url(OPENAI),
      apiKeyEnv: "FWD_KEY",
      upstreamModel: "gpt-plain-up",
      maxOutputTokens: 1000,
      dropParams: ["reasoning_effort"],
    },
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
  openai.reset();
  anthropic.reset();
  msw.resetHandlers();
});

/** Server-sent events with their `event:` names and parsed `data:`. */
function sseEvents(text: string): { event?: string; data: unknown }[] {
  return text
    .split("\n\n")
    .filter((frame) => frame.trim())
    .map((frame) => {
      const event = /^event: (.*)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)?.[1] ?? "";
      return { ...(event ? { event } : {}), data: JSON.parse(data) };
    });
}

const post = (path: string, json: unknown, headers: Record<string, string> = {}) =>
  server.request(path, { method: "POST", headers: { ...bearer(token), ...headers }, json });

describe("chat completions to a chat-format upstream", () => {
  it("forward every field the client sent, unknown ones included, with only the model id changed", async () => {
    const body = {
      model: "gpt",
      messages: [
        { role: "developer", content: "Be brief." },
        {
          role: "user",
          content: [
            { type: "text", text: "hi" },
            { type: "input_audio", input_audio: { data: "AAAA", format: "wav" } },
          ],
        },
      ],
      prediction: { type: "content", content: "hello" },
      logit_bias: { "50256": -100 },
      service_tier: "flex",
      verbosity: "low",
      web_search_options: {},
      tools: [{ type: "custom", custom: { name: "apply_patch", description: "patches" } }],
      n: 2,
      seed: 3,
      a_field_from_next_month: { nested: [1, 2] },
    };
    const res = await post("/gateway/v1/chat/completions", body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.headers.get("x-service-warning")).toBeNull();
    expect(openai.calls.at(-1)!.body).toEqual({ ...body, model: "gpt-up" });
  });

  it("a stream asks the upstream for usage on top of what the client sent", async () => {
    const res = await post("/gateway/v1/chat/completions", {
      model: "gpt",
      stream: true,
      stream_options: { extra: 1 },
      messages: [{ role: "user", content: "hi" }],
    });
    expect(res.status).toBe(200);
    expect(openai.calls.at(-1)!.body.stream_options).toEqual({ extra: 1, include_usage: true });
  });

  it("dropParams leaves out what the model's upstream refuses, with a warning, and a translated cap is lowered to maxOutputTokens", async () => {
    const res = await post("/gateway/v1/chat/completions", {
      model: "gpt-plain",
      reasoning_effort: "high",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(res.status).toBe(200);
    expect(openai.calls.at(-1)!.body.reasoning_effort).toBeUndefined();
    expect(res.headers.get("x-service-warning")).toContain("reasoning_effort dropped");
    // A Messages request (Claude Code's max_tokens: 32000) is translated: its cap meets the model's.
    const messages = await post("/gateway/v1/messages", {
      model: "gpt-plain",
      max_tokens: 32000,
      messages: [{ role: "user", content: "hi" }],
      output_config: { effort: "high" },
    });
    expect(messages.status, JSON.stringify(messages.body)).toBe(200);
    const sent = openai.calls.at(-1)!.body;
    expect(sent.max_tokens).toBe(1000);
    expect(sent.reasoning_effort).toBeUndefined();
    expect(messages.headers.get("x-service-warning")).toMatch(
      /max_tokens lowered to 1000.*reasoning_effort dropped|reasoning_effort dropped.*max_tokens lowered/,
    );
  });
});

describe("Messages to an Anthropic upstream", () => {
  const claudeCodeBody = {
    model: "claude",
    max_tokens: 32000,
    stream: false,
    system: [{ type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } }],
    messages: [
      { role: "user", content: [{ type: "text", text: "hello" }] },
      { role: "system", content: "Mid-conversation instructions." },
      {
        role: "user",
        content: [
          { type: "text", text: "go on" },
          { type: "search_result", source: "s", title: "t", content: [] },
        ],
      },
    ],
    tools: [
      { name: "Bash", description: "Runs a command", input_schema: { type: "object", properties: { command: { type: "string" } } } },
      { type: "web_search_20250305", name: "web_search", max_uses: 3 },
    ],
    thinking: { type: "adaptive", display: "omitted" },
    context_management: { edits: [{ type: "clear_thinking_20251015", keep: "all" }] },
    output_config: { effort: "high" },
    metadata: { user_id: "device-1" },
  };

  it("go as the client sent them, beta header and query included, with no warning", async () => {
    const res = await server.request("/gateway/v1/messages?beta=true", {
      method: "POST",
      headers: { ...bearer(token), "anthropic-beta": "context-management-2025-06-27,effort-2025-11-24", "anthropic-version": "2023-06-01" },
      json: claudeCodeBody,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.headers.get("x-service-warning")).toBeNull();
    expect(res.headers.get("request-id")).toBe(res.headers.get("x-request-id"));
    const call = anthropic.calls.at(-1)!;
    expect(call.body).toEqual({ ...claudeCodeBody, model: "claude-up" });
    expect(call.url.search).toBe("?beta=true");
    expect(call.headers.get("anthropic-beta")).toBe("context-management-2025-06-27,effort-2025-11-24");
    expect(call.headers.get("x-api-key")).toBe("sk-forwarding");
    expect(call.headers.get("authorization")).toBeNull();
  });

  it("answer as Anthropic answered, JSON and streamed event by event, with the model id the client asked for, metered on its usage", async () => {
    const message = {
      id: "msg_native",
      type: "message",
      role: "assistant",
      model: "claude-up",
      content: [
        { type: "thinking", thinking: "Let me see.", signature: "sig-abc" },
        { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: { query: "x" } },
        { type: "text", text: "Done.", citations: [{ type: "web_search_result_location", url: "https://example.com", title: "e" }] },
      ],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: {
        input_tokens: 13,
        output_tokens: 7,
        cache_read_input_tokens: 4,
        cache_creation_input_tokens: 0,
        server_tool_use: { web_search_requests: 1 },
      },
    };
    const events = [
      {
        type: "message_start",
        message: { ...message, content: [], stop_reason: null, usage: { input_tokens: 13, cache_read_input_tokens: 4, output_tokens: 1 } },
      },
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "ping" },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Let me see." } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "sig-abc" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "Done." } },
      {
        type: "content_block_delta",
        index: 1,
        delta: { type: "citations_delta", citation: { type: "web_search_result_location", url: "https://example.com" } },
      },
      { type: "content_block_stop", index: 1 },
      { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 7, input_tokens: 13 } },
      { type: "message_stop" },
    ];
    msw.use(
      http.post(`${ANTHROPIC}/v1/messages`, async ({ request }) => {
        const body = (await request.json()) as { stream?: boolean };
        if (!body.stream) return HttpResponse.json(message);
        const text = events.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join("");
        return new HttpResponse(text, { headers: { "content-type": "text/event-stream" } });
      }),
    );
    const json = await post("/gateway/v1/messages", { model: "claude", max_tokens: 100, messages: [{ role: "user", content: "hi" }] });
    expect(json.status).toBe(200);
    expect(json.body).toEqual({ ...message, model: "claude" });

    const streamed = await post("/gateway/v1/messages", {
      model: "claude",
      max_tokens: 100,
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(streamed.status).toBe(200);
    const received = sseEvents(streamed.body as string);
    expect(received.map((event) => event.data)).toEqual(
      events.map((event) => (event.type === "message_start" ? { ...event, message: { ...event.message, model: "claude" } } : event)),
    );
    expect(received.map((event) => event.event)).toEqual(events.map((event) => event.type));
    // Metered on Anthropic's own count: 13 + 4 cached prompt tokens, 7 out.
    const line = server
      .logs()
      .filter((entry) => entry.operation === "gateway.messages.create")
      .at(-1)!;
    expect(line).toMatchObject({ inputTokens: 17, outputTokens: 7 });
  });
});

describe("Messages to a chat-format upstream", () => {
  it("are translated: system turns in place, dropped server tools and untranslated fields named in the warning", async () => {
    const res = await post("/gateway/v1/messages", {
      model: "gpt",
      max_tokens: 200,
      system: "Top.",
      messages: [
        { role: "user", content: "hello" },
        { role: "system", content: "Later." },
        { role: "user", content: "go on" },
      ],
      tools: [
        { name: "Bash", input_schema: { type: "object", properties: {} } },
        { type: "web_search_20250305", name: "web_search" },
      ],
      thinking: { type: "adaptive" },
      context_management: { edits: [] },
      output_config: {
        effort: "medium",
        format: { type: "json_schema", schema: { type: "object", properties: { a: { type: "string" } } } },
      },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const sent = openai.calls.at(-1)!.body;
    expect(sent.messages).toEqual([
      { role: "system", content: "Top." },
      { role: "user", content: "hello" },
      { role: "system", content: "Later." },
      { role: "user", content: "go on" },
    ]);
    expect(sent.tools).toEqual([{ type: "function", function: { name: "Bash", parameters: { type: "object", properties: {} } } }]);
    expect(sent.reasoning_effort).toBe("medium");
    expect(sent.response_format).toEqual({
      type: "json_schema",
      json_schema: { name: "output", schema: { type: "object", properties: { a: { type: "string" } } } },
    });
    const warning = res.headers.get("x-service-warning")!;
    expect(warning).toContain("context_management dropped");
    expect(warning).toContain("tools.1 dropped: web_search_20250305 tools are not run by this service");
    expect(server.logs().at(-1)!.warnings).toEqual(warning.split("; "));
  });

  it("a block the chat format has no form for is a 400 naming it, before anything is sent", async () => {
    const res = await post("/gateway/v1/messages", {
      model: "gpt",
      max_tokens: 20,
      messages: [{ role: "user", content: [{ type: "search_result", source: "s", title: "t", content: [] }] }],
    });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain("messages.0.content.0.type");
    expect(openai.calls).toHaveLength(0);
  });
});

describe("Responses to a chat-format upstream", () => {
  /** What Codex CLI sends (test/fixtures/clients/codex-exec-prompt.json), trimmed. */
  const codex = {
    model: "gpt",
    stream: false,
    input: [
      { type: "message", role: "developer", content: [{ type: "input_text", text: "You are Codex." }] },
      { type: "message", role: "user", content: [{ type: "input_text", text: "spawn a helper" }] },
    ],
    tools: [
      {
        type: "function",
        name: "exec_command",
        description: "Runs a command",
        parameters: { type: "object", properties: { cmd: { type: "string" } } },
      },
      {
        type: "namespace",
        name: "multi_agent_v1",
        description: "Agents",
        tools: [{ type: "function", name: "spawn", parameters: { type: "object", properties: { task: { type: "string" } } } }],
      },
      { type: "web_search", external_web_access: false },
    ],
    tool_choice: "auto",
    parallel_tool_calls: true,
    reasoning: { summary: "auto" },
    store: false,
    include: ["reasoning.encrypted_content"],
    prompt_cache_key: "01a21f42",
    client_metadata: { session_id: "s" },
  };

  it("flatten namespace tools, drop the web search with a warning, and give calls back with their namespace", async () => {
    openai.script("gpt-up", {
      kind: "turn",
      turn: { toolCalls: [{ id: "call_ns", name: "multi_agent_v1__spawn", input: { task: "review" } }] },
    });
    const res = await post("/gateway/v1/responses", codex);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const sent = openai.calls.at(-1)!.body;
    expect(sent.tools.map((tool: { function: { name: string } }) => tool.function.name)).toEqual(["exec_command", "multi_agent_v1__spawn"]);
    // `developer` is `system` for chat-format upstreams, which not all take `developer`.
    expect(sent.messages[0]).toEqual({ role: "system", content: [{ type: "text", text: "You are Codex." }] });
    const warning = res.headers.get("x-service-warning")!;
    for (const field of ["tools.2 dropped: web_search tools", "include dropped", "prompt_cache_key dropped", "client_metadata dropped"])
      expect(warning).toContain(field);
    expect(res.body.output).toEqual([
      expect.objectContaining({
        type: "function_call",
        call_id: "call_ns",
        name: "spawn",
        namespace: "multi_agent_v1",
        arguments: '{"task":"review"}',
      }),
    ]);
    // The call and its output sent back reach the model under the flattened name.
    await post("/gateway/v1/responses", {
      ...codex,
      input: [
        ...codex.input,
        { type: "function_call", call_id: "call_ns", name: "spawn", namespace: "multi_agent_v1", arguments: '{"task":"review"}' },
        { type: "function_call_output", call_id: "call_ns", output: "spawned" },
      ],
    });
    expect(openai.calls.at(-1)!.body.messages.slice(-2)).toEqual([
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_ns", type: "function", function: { name: "multi_agent_v1__spawn", arguments: '{"task":"review"}' } }],
      },
      { role: "tool", tool_call_id: "call_ns", content: "spawned" },
    ]);
  });

  it("give a custom tool a text input and its call back as a custom_tool_call, JSON and streamed", async () => {
    const body = {
      model: "gpt",
      input: "patch it",
      tools: [
        {
          type: "custom",
          name: "apply_patch",
          description: "Applies a patch",
          format: { type: "grammar", syntax: "lark", definition: "start: /.+/" },
        },
      ],
    };
    const call = {
      kind: "turn" as const,
      turn: { toolCalls: [{ id: "call_p", name: "apply_patch", input: { input: "*** Begin Patch" } }] },
    };
    openai.script("gpt-up", call);
    const json = await post("/gateway/v1/responses", body);
    expect(json.status, JSON.stringify(json.body)).toBe(200);
    expect(openai.calls.at(-1)!.body.tools[0].function).toMatchObject({ name: "apply_patch", parameters: { required: ["input"] } });
    expect(json.body.output).toEqual([
      expect.objectContaining({ type: "custom_tool_call", call_id: "call_p", name: "apply_patch", input: "*** Begin Patch" }),
    ]);

    openai.script("gpt-up", call);
    const streamed = await post("/gateway/v1/responses", { ...body, stream: true });
    const events = sseEvents(streamed.body as string).map((event) => event.data as Record<string, unknown>);
    expect(events.filter((event) => String(event.type).startsWith("response.custom_tool_call_input"))).toEqual([
      expect.objectContaining({ type: "response.custom_tool_call_input.delta", delta: "*** Begin Patch" }),
      expect.objectContaining({ type: "response.custom_tool_call_input.done", input: "*** Begin Patch" }),
    ]);
    const completed = events.at(-1) as { type: string; response: { output: unknown[] } };
    expect(completed.type).toBe("response.completed");
    expect(completed.response.output).toEqual([expect.objectContaining({ type: "custom_tool_call", input: "*** Begin Patch" })]);
  });

  it("stored state is a 400 saying what to send instead, since the upstream keeps none", async () => {
    const res = await post("/gateway/v1/responses", { model: "gpt", input: "x", previous_response_id: "resp_1" });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain("send the whole conversation in input");
    expect(openai.calls).toHaveLength(0);
  });
});
