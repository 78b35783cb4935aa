import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mockUpstreams } from "../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { loopbackFetch, platformAccount, sseData, type PlatformAccount } from "../helpers/chat.js";
import { createOpenAiUpstream } from "../../mocks/openai-upstream.js";

/** Issue 13: metrics, request ids and trace context, rate-limit headers, over real HTTP. */

const UPSTREAM = "http://ops.upstream.test/v1";
const upstream = createOpenAiUpstream(UPSTREAM);
const msw = mockUpstreams(...upstream.handlers);
const METRICS_TOKEN = "metrics-token-0123456789";
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

let server: TestServer;
let account: PlatformAccount;

/** Parses the Prometheus text format into samples: name, labels, value. */
function parseExposition(text: string) {
  const samples: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!match) throw new Error(`not exposition format: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

beforeAll(async () => {
  await msw.listen();
  const models = {
    remote: {
      provider: "openai-compatible",
      baseURL: msw.url(UPSTREAM),
      upstreamModel: "vendor-ops",
      price: { input: 1000, output: 2000 },
    },
  };
  server = await startTestServer({ MODELS_JSON: JSON.stringify({ models }), METRICS_TOKEN });
  account = await platformAccount(server);
});
afterAll(async () => {
  await server.close();
  await msw.close();
});

const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  loopbackFetch(server.url("/api/v1/chat/completions"), {
    method: "POST",
    headers: { ...bearer(account.key), "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "remote", messages: [{ role: "user", content: "hello there" }], ...body }),
  });

describe("request ids and trace context", () => {
  it("gives every request the service's own id, and echoes and logs a sane client X-Request-Id beside it", async () => {
    const user = await registerUser(server);
    const kept = await server.request("/gateway/v1/auth/me", { headers: { ...bearer(user.token), "x-request-id": "client-id-42" } });
    expect(kept.headers.get("x-request-id")).toBe("client-id-42");
    expect(server.logs().find((entry) => entry.clientRequestId === "client-id-42")?.requestId).toMatch(/^[0-9a-f-]{36}$/);
    const replaced = await server.request("/gateway/v1/auth/me", { headers: { ...bearer(user.token), "x-request-id": "x".repeat(129) } });
    expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    // A client's id never becomes the service's, even in an error envelope.
    const refused = await server.request("/gateway/v1/auth/me", { headers: { ...bearer("not-a-token"), "x-request-id": "client-id-43" } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("x-request-id")).toBe("client-id-43");
    expect(refused.body.error.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(server.logs().find((entry) => entry.clientRequestId === "client-id-43")).toMatchObject({
      requestId: refused.body.error.requestId,
    });

    const response = await chat({}, { "x-request-id": "chat-id-7", traceparent: TRACEPARENT });
    expect(response.status).toBe(200);
    await response.text();
    // docs/interface.md 4.2: the Platform adds X-Service-Request-Id only, the service's own id.
    expect(response.headers.get("x-request-id")).toBeNull();
    const serviceId = response.headers.get("x-service-request-id")!;
    expect(serviceId).toMatch(/^[0-9a-f-]{36}$/);
    expect(upstream.calls.at(-1)!.headers.get("traceparent")).toBe(TRACEPARENT);
    const line = server.logs().find((entry) => entry.clientRequestId === "chat-id-7")!;
    expect(line).toMatchObject({
      requestId: serviceId,
      operation: "platform.chat.completions",
      model: "remote",
      inputTokens: expect.any(Number),
      outputTokens: 2,
      costMicrocredits: expect.any(Number),
    });
    expect(line.upstreamLatencyMs).toEqual(expect.any(Number));
  });

  it("passes traceparent on every model turn of an agent run", async () => {
    const user = await registerUser(server);
    const agent = await server.request("/gateway/v1/agents", {
      method: "POST",
      headers: bearer(user.token),
      json: { name: "traced", model: "remote", config: { maxTokens: 16 } },
    });
    expect(agent.status).toBe(201);
    const before = upstream.calls.length;
    const invoked = await server.request(`/gateway/v1/agents/${agent.body.id}/invoke`, {
      method: "POST",
      headers: { ...bearer(user.token), traceparent: TRACEPARENT },
      json: { input: "trace me" },
    });
    expect(invoked.status).toBe(200);
    const turns = upstream.calls.slice(before);
    expect(turns.length).toBeGreaterThan(0);
    for (const call of turns) expect(call.headers.get("traceparent")).toBe(TRACEPARENT);
  });

  it("logs a stream's tokens and time to first token once it ends", async () => {
    const response = await chat({ stream: true }, { "x-request-id": "stream-id-9" });
    expect(sseData(await response.text()).at(-1)).toBe("[DONE]");
    const line = server.logs().find((entry) => entry.clientRequestId === "stream-id-9")!;
    expect(line).toMatchObject({ model: "remote", outputTokens: 2, timeToFirstTokenMs: expect.any(Number) });
  });
});

describe("rate-limit headers", () => {
  it("are on Gateway and bridge answers that count against the limit, never on the Platform", async () => {
    const user = await registerUser(server);
    for (const path of ["/gateway/v1/mcp/tools", "/bridge/v1/mcp/tools"]) {
      const res = await server.request(path, { headers: bearer(user.token) });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit")).toBe("120");
      expect(Number(res.headers.get("x-ratelimit-remaining"))).toBeLessThan(120);
      expect(Number(res.headers.get("x-ratelimit-reset"))).toBeGreaterThanOrEqual(0);
    }
    const platform = await server.request("/api/v1/models", { headers: bearer(account.key) });
    expect([...platform.headers.keys()].filter((name) => name.startsWith("x-ratelimit") || name === "x-request-id")).toEqual([]);
  });
});

describe("GET /metrics", () => {
  it("needs METRICS_TOKEN when set, and is neither logged nor rate-limited", async () => {
    expect((await server.request("/metrics")).status).toBe(401);
    expect((await server.request("/metrics", { headers: bearer("wrong-token-of-some-length") })).status).toBe(401);
    for (let i = 0; i < 3; i++) expect((await server.request("/metrics", { headers: bearer(METRICS_TOKEN) })).status).toBe(200);
    expect(server.logs().filter((line) => line.path === "/metrics")).toEqual([]);
  });

  it("exposes HTTP, chat, refusal, tool, storage and process metrics with bounded labels", async () => {
    const broke = await platformAccount(server, 0);
    const refused = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(broke.key),
      json: { model: "remote", messages: [{ role: "user", content: "hi" }] },
    });
    expect(refused.status).toBe(402);
    const user = await registerUser(server);
    await server.request("/gateway/v1/mcp/tools/execute?tool=calculator", {
      method: "POST",
      headers: bearer(user.token),
      json: { args: { expression: "1+2" } },
    });
    await server.request("/gateway/v1/agents/some-random-id-123", { headers: bearer(user.token) });
    await server.request("/rpc", { method: "POST", json: { jsonrpc: "2.0", id: 1, method: "made.up.method-xyz" } });

    const scraped = await loopbackFetch(server.url("/metrics"), { headers: bearer(METRICS_TOKEN) });
    expect(scraped.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const samples = parseExposition(await scraped.text());
    const find = (name: string, labels: Record<string, string> = {}) =>
      samples.filter((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value));

    expect(
      find("gateway_http_requests_total", { surface: "platform", operation: "platform.chat.completions", status: "200" })[0]?.value,
    ).toBeGreaterThanOrEqual(2);
    expect(find("gateway_http_request_duration_seconds_count", { surface: "gateway", operation: "auth.me" }).length).toBeGreaterThan(0);
    expect(find("gateway_refusals_total", { status: "402", reason: "INSUFFICIENT_CREDITS" })[0]?.value).toBeGreaterThanOrEqual(1);
    expect(find("gateway_model_upstream_latency_seconds_count", { model: "remote" })[0]?.value).toBeGreaterThanOrEqual(2);
    expect(find("gateway_model_time_to_first_token_seconds_count", { model: "remote" })[0]?.value).toBeGreaterThanOrEqual(1);
    expect(find("gateway_chat_tokens_total", { model: "remote", surface: "platform", kind: "output" })[0]?.value).toBeGreaterThanOrEqual(4);
    expect(find("gateway_chat_cost_microcredits_total", { model: "remote", surface: "platform" })[0]?.value).toBeGreaterThan(0);
    expect(find("gateway_tool_calls_total", { source: "builtin", outcome: "ok" })[0]?.value).toBeGreaterThanOrEqual(1);
    expect(find("gateway_storage_operation_seconds_count", { operation: "getItem" })[0]?.value).toBeGreaterThan(0);
    expect(find("gateway_mcp_sessions")).toHaveLength(1);
    expect(find("gateway_vm_sockets")[0]?.value).toBe(0);
    expect(find("nodejs_eventloop_lag_seconds")).toHaveLength(1);
    expect(find("process_resident_memory_bytes")).toHaveLength(1);

    // Bounded labels: no path, id or client-chosen method name becomes a label value.
    const operations = new Set(find("gateway_http_requests_total").map((sample) => sample.labels.operation));
    const known = new Set([...Object.keys(server.dispatcher.registry), "other", "none", "mcp", "not_found"]);
    expect([...operations].filter((operation) => !known.has(operation!))).toEqual([]);
    expect(JSON.stringify(samples)).not.toMatch(/some-random-id-123|made\.up\.method-xyz/);
  });
});
