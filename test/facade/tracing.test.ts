import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOpenAiUpstream } from "../../mocks/openai-upstream.js";
import { serveMockUpstreams, type MockUpstreams } from "../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { openaiClient, platformAccount, userMessage } from "../helpers/chat.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../helpers/otlp-receiver.js";
import { connectVm, vmSocketUrl, type TestVm } from "../helpers/vm.js";
import { startReceiver } from "../helpers/webhook-receiver.js";
import { eventually } from "../helpers/eventually.js";
import { readFileSync } from "node:fs";
import { http, HttpResponse } from "msw";
import { createOrchestratorMock } from "../../mocks/orchestrator.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { serveScripted } from "../helpers/upstream.js";
import type { ResolveHost } from "../../rpc/outbound/outbound-guard.js";
import { tracingEnabled } from "../../rpc/tracing.js";

/**
 * Traces (docs/observability.md "Traces") exported to a real OTLP/HTTP receiver on loopback, in
 * http/protobuf and http/json, and the LLM metrics on /metrics after the same traffic. Tracing
 * is process-wide, so each protocol gets its own server in turn; the OTEL_* variables are set
 * on this test file's process, as an operator sets them on the service's.
 */

const UPSTREAM = "http://models.upstream.test/v1";
const upstream = createOpenAiUpstream(UPSTREAM);
const UPSTREAM_KEY = "sk-upstream-key-that-must-never-be-exported-0123";
const PROMPT = "the confidential prompt words zebra quartz";
const CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN = "b7ad6b7169203331";
const TRACEPARENT = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;

const resolveHost: ResolveHost = async (host) => {
  if (host === "hooks.example.com") return [{ address: "127.0.0.1", family: 4 }];
  throw Object.assign(new Error(`${host} not found`), { code: "ENOTFOUND" });
};

const MANAGER = "http://manager.billing.test/api";
const SERVICE_SECRET = "service-jwt-secret-for-the-tracing-test-0123456789";
const managerSaw: Headers[] = [];
const manager = http.all(`${MANAGER}/*`, ({ request }) => {
  managerSaw.push(request.headers);
  return HttpResponse.json({ plans: [] });
});

const ORCH = "http://orchestrator.test/api";
const orchestrator = createOrchestratorMock(ORCH);

let msw: MockUpstreams;
let receiver: OtlpReceiver;

const models = () => {
  const deployment = (upstreamModel: string, extra: Record<string, unknown> = {}) => ({
    provider: "openai-compatible",
    baseURL: msw.url(UPSTREAM),
    upstreamModel,
    apiKeyEnv: "TRACING_TEST_UPSTREAM_KEY",
    streamUsage: true,
    ...extra,
  });
  return {
    // Both deployments fail (the second is the retry), then the fallback answers.
    primary: {
      deployments: [deployment("primary-a", { weight: 1 }), deployment("primary-b", { weight: 0 })],
      retries: 1,
      fallbacks: ["secondary"],
    },
    secondary: deployment("secondary-up"),
    cut: deployment("cut-up"),
    // An embedding model (docs/embeddings.md): its attempts are spans of their own.
    "embed-local": { provider: "echo", mode: "embedding" },
  };
};

async function start(protocol: string): Promise<TestServer> {
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.endpoint;
  process.env.OTEL_EXPORTER_OTLP_PROTOCOL = protocol;
  process.env.OTEL_SERVICE_NAME = "gateway-under-test";
  process.env.OTEL_RESOURCE_ATTRIBUTES = "deployment.environment.name=test";
  process.env.OTEL_BSP_SCHEDULE_DELAY = "50";
  process.env.OTEL_EXPORTER_OTLP_HEADERS = "x-collector-token=collector-secret";
  process.env.TRACING_TEST_UPSTREAM_KEY = UPSTREAM_KEY;
  return startTestServer(
    {
      MODELS_JSON: JSON.stringify({ models: models() }),
      WEBHOOKS_ALLOW_PRIVATE: "true",
      WEBHOOKS_POLL_MS: "0",
      MCP_SERVERS_ALLOW_PRIVATE: "true",
      MANAGER_BASE_URL: msw.url(MANAGER),
      ORCH_BASE_URL: msw.url(ORCH),
      SERVICE_JWT_SECRET: SERVICE_SECRET,
    },
    { resolveHost },
  );
}

function stopTracingEnv(): void {
  for (const name of [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_BSP_SCHEDULE_DELAY",
  ])
    delete process.env[name];
}

beforeAll(async () => {
  msw = await serveMockUpstreams(...upstream.handlers, manager, ...orchestrator.handlers);
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  stopTracingEnv();
  delete process.env.TRACING_TEST_UPSTREAM_KEY;
  await receiver.close();
  await msw.close();
});

const inTrace = (traceId: string) => receiver.spans.filter((span) => span.traceId === traceId);
const byId = (id: string) => receiver.spans.find((span) => span.spanId === id);
const traceparentParts = (value: string | null | undefined) => {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(value ?? "");
  if (!match) throw new Error(`not a traceparent: ${value}`);
  return { traceId: match[1]!, spanId: match[2]! };
};

describe("traces over http/protobuf", () => {
  let server: TestServer;
  let vm: TestVm;
  let hooks: Awaited<ReturnType<typeof startReceiver>>;
  const vmCalls: Record<string, unknown>[] = [];
  let secrets: string[] = [];

  beforeAll(async () => {
    server = await start("http/protobuf");
    hooks = await startReceiver();
  });
  afterAll(async () => {
    await vm?.close();
    await server.close();
    await hooks.close();
  });

  it("one trace from the caller's traceparent: a chat with a retry and a fallback, a VM tool call and a webhook delivery", async () => {
    const account = await platformAccount(server, 10);
    const user = await registerUser(server);
    secrets = [account.key, user.token, UPSTREAM_KEY];

    // The chat: both deployments of `primary` fail with 503, `secondary` answers (streamed).
    upstream.script("primary-a", { kind: "error", status: 503, body: { error: { message: "a is down", type: "server_error" } } });
    upstream.script("primary-b", { kind: "error", status: 503, body: { error: { message: "b is down", type: "server_error" } } });
    upstream.script("secondary-up", { kind: "stream", words: ["answer", " text", " here"] });
    const client = openaiClient(server, "/api/v1", account.key);
    const stream = await client.chat.completions.create(
      { model: "primary", messages: userMessage(PROMPT), stream: true, max_tokens: 50 },
      { headers: { traceparent: TRACEPARENT } },
    );
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("answer text here");

    // A tool on a VM.
    vm = await connectVm(vmSocketUrl(server.origin, "agent-1", { vmId: "vm-traced" }), user.token, {
      "tools/call": (params: Record<string, unknown>) => {
        vmCalls.push(params);
        return { content: [{ type: "text", text: "done" }] };
      },
    });
    await vm.register([{ name: "echo", inputSchema: { type: "object", properties: { text: { type: "string" } } } }]);
    const executed = await server.request("/bridge/tools/execute", {
      method: "POST",
      headers: { ...bearer(user.token), traceparent: TRACEPARENT },
      json: { tool_name: "echo", input: { text: "tool input" }, vm_id: "vm-traced" },
    });
    expect(executed.status).toBe(200);

    // A webhook delivery of an event published under the same trace.
    const sub = await server.request("/gateway/v1/webhooks/subscriptions", {
      method: "POST",
      headers: bearer(user.token),
      json: { url: `http://hooks.example.com:${hooks.port}/hook`, filter: ["order.*"] },
    });
    expect(sub.status).toBe(201);
    hooks.secrets.push(sub.body.secret);
    secrets.push(sub.body.secret);
    const published = await server.request("/gateway/v1/events", {
      method: "POST",
      headers: { ...bearer(user.token), traceparent: TRACEPARENT },
      json: { topic: "order", type: "order.created", payload: { n: 1 } },
    });
    expect(published.status).toBe(201);
    await eventually(() => hooks.received.length === 1);
    // …and consumed by a group, still under the caller's trace.
    const consumed = await server.request("/gateway/v1/events/consume", {
      method: "POST",
      headers: { ...bearer(user.token), traceparent: TRACEPARENT },
      json: { topic: "order", consumer: "billing" },
    });
    expect(consumed.status).toBe(200);
    expect(consumed.body.data).toHaveLength(1);

    await eventually(() => inTrace(CALLER_TRACE).some((span) => span.name.startsWith("process ")), 10_000);
    await eventually(() => inTrace(CALLER_TRACE).some((span) => span.name.startsWith("webhook ")), 10_000);
    const spans = inTrace(CALLER_TRACE);

    // Server spans continue the caller's span; the resource carries the OTEL_* settings.
    const servers = spans.filter((span) => span.kind === 2);
    expect(servers.map((span) => span.name).sort()).toEqual(
      ["POST bridge.tools.execute", "POST events.consume", "POST events.publish", "POST platform.chat.completions"].sort(),
    );
    for (const span of servers) expect(span.parentSpanId).toBe(CALLER_SPAN);
    expect(servers[0]!.resource).toMatchObject({ "service.name": "gateway-under-test", "deployment.environment.name": "test" });
    const chatServer = servers.find((span) => span.name === "POST platform.chat.completions")!;
    expect(chatServer.attributes).toMatchObject({
      "http.request.method": "POST",
      "http.response.status_code": 200,
      "gateway.surface": "platform",
    });

    // The dispatcher's span of the method, under the server span.
    const call = spans.find((span) => span.name === "platform.chat.completions")!;
    expect(call.parentSpanId).toBe(chatServer.spanId);
    expect(call.attributes).toMatchObject({
      "gateway.method": "platform.chat.completions",
      "gateway.surface": "platform",
      "gateway.transport": "rest",
      "gateway.outcome": "ok",
      "gateway.principal.kind": "platform_key",
      "gateway.workspace_id": account.workspaceId,
    });

    // Three attempts under the call: the first deployment, its retry on the second, the fallback.
    const attempts = spans.filter((span) => span.attributes["gen_ai.operation.name"] === "chat");
    expect(attempts).toHaveLength(3);
    for (const attempt of attempts) {
      expect(attempt.kind).toBe(3);
      expect(attempt.parentSpanId).toBe(call.spanId);
    }
    const [first, retry, fallback] = ["primary-a", "primary-b", "secondary-up"].map(
      (model) => attempts.find((span) => span.attributes["gen_ai.request.model"] === model)!,
    );
    expect(first!.attributes).toMatchObject({
      "gen_ai.provider.name": "openai",
      "gateway.model": "primary",
      "gateway.deployment": "0",
      "gateway.retry": 0,
      "error.type": "503",
    });
    expect(first!.status).toBe(2);
    expect(retry!.attributes).toMatchObject({
      "gateway.model": "primary",
      "gateway.deployment": "1",
      "gateway.retry": 1,
      "error.type": "503",
    });
    expect(fallback!.attributes).toMatchObject({
      "gateway.model": "secondary",
      "gateway.fallback_from": "primary",
      "gateway.retry": 0,
      "gateway.stream": true,
      "gen_ai.request.max_tokens": 50,
      "gen_ai.response.model": "secondary-up",
      "gen_ai.usage.input_tokens": 10,
      "gen_ai.usage.output_tokens": 3,
      "gen_ai.response.finish_reasons": ["stop"],
    });
    expect(fallback!.status).not.toBe(2);

    // Each upstream request carried its own attempt's span as traceparent.
    for (const [model, span] of [
      ["primary-a", first],
      ["primary-b", retry],
      ["secondary-up", fallback],
    ] as const) {
      const sent = upstream.calls.find((c) => c.body.model === model)!;
      expect(traceparentParts(sent.headers.get("traceparent"))).toEqual({ traceId: CALLER_TRACE, spanId: span!.spanId });
    }

    // The VM tool call: a span under its method's, which the VM got in the request's _meta.
    const tool = spans.find((span) => span.attributes["gen_ai.operation.name"] === "execute_tool")!;
    expect(tool.attributes).toMatchObject({
      "gen_ai.tool.name": "vm__vm-traced__echo",
      "gateway.tool.source": "vm",
      "gateway.tool.outcome": "ok",
    });
    expect(byId(tool.parentSpanId)!.name).toBe("bridge.tools.execute");
    expect(vmCalls).toHaveLength(1);
    const meta = (vmCalls[0] as { _meta?: { traceparent?: string } })._meta;
    expect(traceparentParts(meta?.traceparent)).toEqual({ traceId: CALLER_TRACE, spanId: tool.spanId });

    // The webhook attempt continues the span that published the event, and the receiver got it.
    const hook = spans.find((span) => span.name === "webhook order.created")!;
    expect(hook.kind).toBe(3);
    expect(byId(hook.parentSpanId)!.name).toBe("events.publish");
    expect(hook.attributes).toMatchObject({
      "gateway.webhook.attempt": 1,
      "gateway.event.type": "order.created",
      "http.response.status_code": 200,
      "server.address": `hooks.example.com:${hooks.port}`,
    });
    expect(traceparentParts(hooks.received[0]!.headers.traceparent as string)).toEqual({ traceId: CALLER_TRACE, spanId: hook.spanId });

    // The event consumed by its group.
    const processed = spans.find((span) => span.name === "process order")!;
    // The calls that act in a tenant name it.
    const tenantId = processed.attributes["gateway.tenant_id"];
    expect(tenantId).toMatch(/^ten_/);
    expect(spans.find((span) => span.name === "events.publish")!.attributes["gateway.tenant_id"]).toBe(tenantId);
    expect(processed.kind).toBe(5);
    expect(processed.attributes).toMatchObject({ "messaging.consumer.group.name": "billing", "gateway.event.type": "order.created" });
    expect(byId(processed.parentSpanId)!.name).toBe("events.consume");

    // The request's log line carries its server span's ids.
    const line = server.logs().find((entry) => entry.operation === "platform.chat.completions")!;
    expect(line).toMatchObject({ trace_id: CALLER_TRACE, span_id: chatServer.spanId });
  });

  it("an upstream MCP server gets the tool call's span in _meta, on the direct path and the SDK's", async () => {
    const mcpUpstream = await serveScripted([
      {
        tool: { name: "echo", inputSchema: { type: "object", properties: { text: { type: "string" } } } },
        run: (args) => ({ content: [{ type: "text", text: `echo ${String(args.text)}` }] }),
      },
    ]);
    const user = await registerUser(server);
    secrets.push(user.token);
    const registered = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: bearer(user.token),
      json: { name: "traced", url: mcpUpstream.url },
    });
    expect(registered.status).toBe(201);
    const client = new Client({ name: "tracing-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), {
      requestInit: { headers: { ...bearer(user.token), traceparent: TRACEPARENT } },
    });
    try {
      await client.connect(transport);
      // No progress asked: the gateway's own JSON-RPC POST upstream; with progress: the SDK client's request.
      await client.callTool({ name: "traced__echo", arguments: { text: "direct" } });
      await client.callTool({ name: "traced__echo", arguments: { text: "sdk" } }, undefined, { onprogress: () => undefined });
    } finally {
      await client.close().catch(() => undefined);
    }
    const calls = mcpUpstream.requestBodies.flatMap((body) => (Array.isArray(body) ? body : [body])) as {
      method?: string;
      params?: { arguments?: { text?: string }; _meta?: { traceparent?: string; progressToken?: unknown } };
    }[];
    const toolCalls = calls.filter((message) => message.method === "tools/call");
    expect(toolCalls.map((message) => message.params?.arguments?.text)).toEqual(["direct", "sdk"]);
    expect(toolCalls[1]!.params?._meta?.progressToken).toBeDefined();
    await eventually(() => inTrace(CALLER_TRACE).filter((span) => span.attributes["gateway.tool.source"] === "mcp").length === 2, 10_000);
    const spans = inTrace(CALLER_TRACE).filter((span) => span.attributes["gateway.tool.source"] === "mcp");
    for (const message of toolCalls) {
      const sent = traceparentParts(message.params?._meta?.traceparent);
      expect(sent.traceId).toBe(CALLER_TRACE);
      expect(spans.map((span) => span.spanId)).toContain(sent.spanId);
    }
    expect(spans[0]!.attributes).toMatchObject({ "gen_ai.tool.name": "traced__echo", "gateway.tool.outcome": "ok" });
    await mcpUpstream.close();
  });

  it("the manager (billing proxy) gets the call's span as traceparent", async () => {
    const user = await registerUser(server);
    secrets.push(SERVICE_SECRET);
    const res = await server.request("/gateway/v1/billing/plans", { headers: { ...bearer(user.token), traceparent: TRACEPARENT } });
    expect(res.status).toBe(200);
    const sent = traceparentParts(managerSaw.at(-1)?.get("traceparent"));
    // The service token the proxy signed for the manager never reaches a span either.
    const token = managerSaw
      .at(-1)
      ?.get("authorization")
      ?.replace(/^Bearer /, "");
    expect(token).toBeTruthy();
    secrets.push(token!);
    expect(sent.traceId).toBe(CALLER_TRACE);
    await eventually(() => byId(sent.spanId), 10_000);
    expect(byId(sent.spanId)).toMatchObject({ name: "billing.proxy", traceId: CALLER_TRACE });
  });

  it("the orchestrator gets the call's span as traceparent", async () => {
    const user = await registerUser(server);
    const res = await server.request("/gateway/v1/agents", {
      method: "POST",
      headers: { ...bearer(user.token), traceparent: TRACEPARENT },
      json: { name: "traced-agent", model: "secondary", tools: [] },
    });
    expect(res.status).toBe(201);
    const sent = traceparentParts(orchestrator.calls.at(-1)!.headers.get("traceparent"));
    expect(sent.traceId).toBe(CALLER_TRACE);
    await eventually(() => byId(sent.spanId), 10_000);
    expect(byId(sent.spanId)!.attributes["gateway.method"]).toMatch(/^agents\./);
    expect(byId(byId(sent.spanId)!.parentSpanId)!.kind).toBe(2);
  });

  it("exports no secret, prompt or completion text", async () => {
    await eventually(() => receiver.rawBodies.length > 0);
    const exported = Buffer.concat(receiver.rawBodies).toString("latin1");
    expect(secrets.length).toBeGreaterThan(3);
    for (const secret of secrets) expect(exported).not.toContain(secret);
    for (const text of ["zebra quartz", "answer text", "tool input", "whsec_"]) expect(exported).not.toContain(text);
    expect(receiver.contentTypes.every((type) => type.startsWith("application/x-protobuf"))).toBe(true);
    // OTEL_EXPORTER_OTLP_HEADERS reach the collector.
    expect(receiver.headers.every((headers) => headers["x-collector-token"] === "collector-secret")).toBe(true);
  });

  it("counts the traffic on /metrics: deployments, retries, fallbacks, cooldowns, streams, tools, webhooks, event lag, MCP", async () => {
    // A stream cut mid-answer counts as an error, not as a 200.
    upstream.script("cut-up", { kind: "stream", words: ["partial", " words", " more"], dropAfter: 1 });
    const account = await platformAccount(server, 10);
    const cut = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(account.key),
      json: { model: "cut", messages: userMessage("hi"), stream: true },
    });
    expect(cut.status).toBe(200);
    // An MCP request, under its own surface label.
    const user = await registerUser(server);
    const mcp = await server.request("/bridge/mcp", {
      method: "POST",
      headers: { ...bearer(user.token), accept: "application/json, text/event-stream" },
      json: { jsonrpc: "2.0", id: 1, method: "tools/list" },
    });
    expect(mcp.status).toBe(200);

    await eventually(() => server.logs().some((entry) => entry.operation === "platform.chat.completions" && entry.status === 502));
    const line = server.logs().find((entry) => entry.operation === "platform.chat.completions" && entry.status === 502)!;
    expect(line).toMatchObject({ level: "warn", sentStatus: 200, streamError: { code: "BAD_GATEWAY" } });

    const text = (await server.request("/metrics")).body as string;
    // The consumer group is labelled by tenant and name.
    expect(text).toMatch(/gateway_event_consume_lag_seconds_count\{group="[^"/]+\/billing",delivery="first"\} 1/);
    const expected = [
      'gateway_model_deployment_latency_seconds_count{model="primary",deployment="0",provider="openai-compatible",status_class="5xx"} 1',
      'gateway_model_deployment_latency_seconds_count{model="primary",deployment="1",provider="openai-compatible",status_class="5xx"} 1',
      'gateway_model_deployment_latency_seconds_count{model="secondary",deployment="0",provider="openai-compatible",status_class="2xx"} 1',
      'gateway_model_retries_total{model="primary"} 1',
      'gateway_model_fallbacks_total{model="primary",fallback="secondary"} 1',
      'gateway_model_deployment_failures_total{model="primary",deployment="0"} 1',
      'gateway_chat_tokens_total{model="primary",surface="platform",kind="output"} 3',
      'gateway_tool_calls_total{source="vm",outcome="ok"} 1',
      'gateway_webhook_attempts_total{outcome="2xx"} 1',
      'gateway_webhook_deliveries_total{outcome="succeeded"} 1',
      "gateway_webhook_queue_depth 0",
      'gateway_streams_in_flight{surface="platform",operation="platform.chat.completions"} 0',
      'gateway_http_requests_total{surface="platform",operation="platform.chat.completions",status="502"} 1',
      'gateway_http_requests_total{surface="mcp",operation="mcp",status="200"} ',
      "# TYPE gateway_model_cooldowns_total counter",
      "# TYPE gateway_model_deployment_cooldown gauge",
      "# TYPE gateway_model_time_to_first_token_seconds histogram",
      "# TYPE gateway_chat_cost_microcredits_total counter",
    ];
    const missing = expected.filter((series) => !text.includes(series));
    expect(
      missing,
      text
        .split("\n")
        .filter((l) => l.startsWith("gateway_"))
        .join("\n"),
    ).toEqual([]);
    // Every series the Grafana dashboard draws exists.
    const dashboard = readFileSync(new URL("../../docs/grafana-dashboard.json", import.meta.url), "utf8");
    const drawn = new Set([...dashboard.matchAll(/\b(gateway_[a-z_]+?)(?:_bucket|_count|_sum)?\b/g)].map((match) => match[1]!));
    expect(drawn.size).toBeGreaterThan(10);
    for (const name of drawn) expect(text, name).toContain(`# TYPE ${name} `);
    // Bounded labels: no key, user or path.
    expect(text).not.toContain(account.key);
    expect(text).not.toContain(user.user.id);
    expect(text).not.toContain("/api/v1/chat");
  });
});

describe("traces over http/json", () => {
  let server: TestServer;
  beforeAll(async () => {
    receiver.spans.length = 0;
    receiver.contentTypes.length = 0;
    server = await start("http/json");
  });
  afterAll(() => server.close());

  it("exports the same spans as OTLP/JSON, and a request without traceparent starts its own trace", async () => {
    upstream.script("secondary-up", { kind: "reply", words: ["json", " reply"] });
    const account = await platformAccount(server, 10);
    const answer = await openaiClient(server, "/api/v1", account.key).chat.completions.create({
      model: "secondary",
      messages: userMessage(PROMPT),
    });
    expect(answer.choices[0]!.message.content).toBe("json reply");
    await eventually(() => receiver.spans.some((span) => span.attributes["gen_ai.operation.name"] === "chat"), 10_000);
    expect(receiver.contentTypes.every((type) => type.startsWith("application/json"))).toBe(true);
    const attempt = receiver.spans.find((span) => span.attributes["gen_ai.operation.name"] === "chat")!;
    expect(attempt.attributes).toMatchObject({
      "gen_ai.request.model": "secondary-up",
      "gen_ai.response.model": "secondary-up",
      "gen_ai.usage.input_tokens": 10,
      "gen_ai.usage.output_tokens": 2,
      "gen_ai.response.finish_reasons": ["stop"],
    });
    const serverSpan = receiver.spans.find((span) => span.kind === 2 && span.traceId === attempt.traceId)!;
    expect(serverSpan.parentSpanId).toBe("");
    expect(traceparentParts(upstream.calls.at(-1)!.headers.get("traceparent"))).toEqual({
      traceId: attempt.traceId,
      spanId: attempt.spanId,
    });
    const exported = receiver.rawBodies.slice(-receiver.contentTypes.length).map(String).join("");
    expect(exported).not.toContain("zebra quartz");
    expect(exported).not.toContain(account.key);
  });

  it("an embeddings request: its attempt is an `embeddings` client span under the call's span, with the input tokens", async () => {
    const user = await registerUser(server);
    const answer = await openaiClient(server, "/gateway/v1", user.token).embeddings.create(
      { model: "embed-local", input: PROMPT },
      { headers: { traceparent: TRACEPARENT } },
    );
    expect(answer.usage.prompt_tokens).toBe(6);
    await eventually(() => inTrace(CALLER_TRACE).some((span) => span.attributes["gen_ai.operation.name"] === "embeddings"), 10_000);
    const attempt = inTrace(CALLER_TRACE).find((span) => span.attributes["gen_ai.operation.name"] === "embeddings")!;
    expect(attempt).toMatchObject({ name: "embeddings embed-local", kind: 3 });
    expect(attempt.attributes).toMatchObject({
      "gen_ai.provider.name": "gateway.echo",
      "gen_ai.request.model": "embed-local",
      "gen_ai.usage.input_tokens": 6,
      "gateway.model": "embed-local",
      "gateway.deployment": "0",
      "gateway.retry": 0,
    });
    expect(byId(attempt.parentSpanId)?.name).toBe("gateway.embeddings.create");
  });
});

describe("without OTEL_* variables", () => {
  let server: TestServer;
  beforeAll(async () => {
    stopTracingEnv();
    receiver.spans.length = 0;
    server = await startTestServer({ MODELS_JSON: JSON.stringify({ models: models() }) });
  });
  afterAll(() => server.close());

  it("exports nothing, passes the caller's traceparent on unchanged, and logs its trace id", async () => {
    upstream.script("secondary-up", { kind: "reply", words: ["plain"] });
    const account = await platformAccount(server, 10);
    await openaiClient(server, "/api/v1", account.key).chat.completions.create(
      { model: "secondary", messages: userMessage("hi") },
      { headers: { traceparent: TRACEPARENT } },
    );
    expect(upstream.calls.at(-1)!.headers.get("traceparent")).toBe(TRACEPARENT);
    const line = server.logs().find((entry) => entry.operation === "platform.chat.completions")!;
    expect(line.trace_id).toBe(CALLER_TRACE);
    expect(line.span_id).toBeUndefined();
    // No tracer is in use, so no span exists to be exported later.
    expect(tracingEnabled()).toBe(false);
    expect(server.logs().some((entry) => entry.event === "tracing.started")).toBe(false);
    expect(receiver.spans).toEqual([] satisfies ReceivedSpan[]);
  });
});
