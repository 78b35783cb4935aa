import { createServer } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { jwtVerify } from "jose";
import { Validator } from "@seriousme/openapi-schema-validator";
import { createOrchestratorMock } from "../../../mocks/orchestrator.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";

const ORCH = "http://orchestrator.test/api";
const SERVICE_SECRET = "service-secret-that-is-at-least-32-chars";
const orchestrator = createOrchestratorMock(ORCH);
const msw = mockUpstreams(...orchestrator.handlers);

let server: TestServer;
let token: string;
let userId: string;
let apiKey: string;

async function freePortThatRefuses(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({ ORCH_BASE_URL: msw.url(ORCH), SERVICE_JWT_SECRET: SERVICE_SECRET, GATEWAY_MAX_RETRIES: "2" });
  const user = await registerUser(server);
  token = user.token;
  userId = user.user.id;
  const key = await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(token), json: { name: "ci" } });
  apiKey = key.body.key;
});

afterEach(() => orchestrator.reset());

afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server?.close();
  await msw.close();
});

const createAgent = (name: string) =>
  server.request("/gateway/v1/agents", {
    method: "POST",
    headers: bearer(token),
    json: { name, model: "echo-1", tools: ["calculator"], description: "builds", config: { repo: "x" } },
  });

describe("orchestrator-proxy mode: each route is forwarded", () => {
  it("POST /agents forwards the body and answers 201 with the orchestrator's agent", async () => {
    const res = await createAgent("builder");
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: "builder", model: "echo-1", tools: ["calculator"], status: "running" });
    const call = orchestrator.calls.at(-1)!;
    expect(call).toMatchObject({ method: "POST", path: "/agents" });
    expect(call.body).toEqual({ name: "builder", model: "echo-1", tools: ["calculator"], description: "builds", config: { repo: "x" } });
  });

  it("forwards the caller's identity and a service token signed with SERVICE_JWT_SECRET, never the caller's credential", async () => {
    await createAgent("identity");
    const res = await server.request("/gateway/v1/agents/identity", { headers: { "x-api-key": apiKey } });
    expect(res.status).toBe(200);
    const call = orchestrator.calls.at(-1)!;
    expect(call.headers.get("x-user-id")).toBe(userId);
    expect(call.headers.get("x-credential-kind")).toBe("gateway_key");
    expect(call.headers.get("x-request-id")).toBe(res.headers.get("x-request-id"));
    const auth = call.headers.get("authorization")!;
    expect(auth).toMatch(/^Bearer /);
    expect(auth).not.toContain(apiKey);
    const { payload } = await jwtVerify(auth.slice(7), new TextEncoder().encode(SERVICE_SECRET), {
      issuer: "gateway",
      audience: "orchestrator",
    });
    expect(payload.sub).toBe(userId);
    expect(call.headers.get("x-api-key")).toBeNull();
  });

  it("GET /agents returns the orchestrator's bare array and passes query parameters on", async () => {
    await createAgent("a1");
    await createAgent("a2");
    await server.request("/gateway/v1/agents/a2/pause", { method: "POST", headers: bearer(token) });
    const all = await server.request("/gateway/v1/agents", { headers: bearer(token) });
    expect(all.status).toBe(200);
    expect(all.body.map((a: { name: string }) => a.name).sort()).toEqual(["a1", "a2"]);
    const paused = await server.request("/gateway/v1/agents?status=paused", { headers: bearer(token) });
    expect(paused.body.map((a: { name: string }) => a.name)).toEqual(["a2"]);
    expect(orchestrator.calls.at(-1)!.query.get("status")).toBe("paused");
  });

  it("GET /agents/{name}/logs forwards tail as a number and validates it", async () => {
    await createAgent("logger");
    const res = await server.request("/gateway/v1/agents/logger/logs?tail=2", { headers: bearer(token) });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ name: "logger", lines: ["line 4 of logger", "line 5 of logger"] });
    expect(orchestrator.calls.at(-1)).toMatchObject({ method: "GET", path: "/agents/logger/logs" });
    expect(orchestrator.calls.at(-1)!.query.get("tail")).toBe("2");
    const bad = await server.request("/gateway/v1/agents/logger/logs?tail=many", { headers: bearer(token) });
    expect(bad.status).toBe(400);
    expect(orchestrator.calls.at(-1)!.query.get("tail")).toBe("2");
  });

  it("pause, resume and cancel move the agent through the orchestrator; a refused transition is 409", async () => {
    await createAgent("worker");
    const pause = await server.request("/gateway/v1/agents/worker/pause", { method: "POST", headers: bearer(token) });
    expect(pause).toMatchObject({ status: 200, body: { name: "worker", status: "paused" } });
    const again = await server.request("/gateway/v1/agents/worker/pause", { method: "POST", headers: bearer(token) });
    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain("Cannot pause agent 'worker' in state paused");
    const resume = await server.request("/gateway/v1/agents/worker/resume", {
      method: "POST",
      headers: bearer(token),
      json: { reason: "go on" },
    });
    expect(resume.body).toMatchObject({ status: "running" });
    expect(orchestrator.calls.at(-1)).toMatchObject({ method: "POST", path: "/agents/worker/resume", body: { reason: "go on" } });
    const cancel = await server.request("/gateway/v1/agents/worker/cancel", { method: "POST", headers: bearer(token) });
    expect(cancel.body).toMatchObject({ status: "cancelled" });
  });

  it("diff, files (with its query), commit and pr are forwarded", async () => {
    await createAgent("coder");
    const diff = await server.request("/gateway/v1/agents/coder/diff", { headers: bearer(token) });
    expect(diff.body.diff).toContain("+new by coder");
    const files = await server.request("/gateway/v1/agents/coder/files?path=/src", { headers: bearer(token) });
    expect(files.body).toEqual({ name: "coder", path: "/src", files: [{ path: "/src/README.md", size: 12 }] });
    expect(orchestrator.calls.at(-1)!.query.get("path")).toBe("/src");
    const commit = await server.request("/gateway/v1/agents/coder/commit", {
      method: "POST",
      headers: bearer(token),
      json: { message: "Fix it" },
    });
    expect(commit).toMatchObject({ status: 200, body: { sha: "0a1b2c3d", message: "Fix it" } });
    expect(orchestrator.calls.at(-1)!.body).toEqual({ message: "Fix it" });
    const pr = await server.request("/gateway/v1/agents/coder/pr", {
      method: "POST",
      headers: bearer(token),
      json: { title: "Better", base: "main" },
    });
    expect(pr.body).toMatchObject({ number: 7, title: "Better" });
    expect(orchestrator.calls.at(-1)).toMatchObject({ method: "POST", path: "/agents/coder/pr", body: { title: "Better", base: "main" } });
  });

  it("names are encoded on the way and validated first", async () => {
    const bad = await server.request("/gateway/v1/agents/..%2Fadmin", { headers: bearer(token) });
    expect(bad.status).toBe(400);
    expect(orchestrator.calls).toHaveLength(0);
  });

  it("JSON-RPC reaches the same methods", async () => {
    await createAgent("viarpc");
    const res = await server.request("/rpc", {
      method: "POST",
      headers: bearer(token),
      json: { jsonrpc: "2.0", id: 1, method: "agents.get", params: { name: "viarpc" } },
    });
    expect(res.body.result).toMatchObject({ name: "viarpc" });
  });

  it("OpenAPI shows the by-name routes of this mode, and no by-id ones", async () => {
    const res = await server.request("/openapi.json");
    const result = await new Validator().validate(res.body);
    expect(result.errors ?? []).toEqual([]);
    const agentPaths = Object.keys(res.body.paths).filter((path) => path.startsWith("/gateway/v1/agents"));
    expect(agentPaths.sort()).toEqual(
      [
        "",
        "/{name}",
        "/{name}/logs",
        "/{name}/pause",
        "/{name}/resume",
        "/{name}/cancel",
        "/{name}/stream",
        "/{name}/diff",
        "/{name}/files",
        "/{name}/commit",
        "/{name}/pr",
      ]
        .map((suffix) => `/gateway/v1/agents${suffix}`)
        .sort(),
    );
  });

  it("requires a gateway credential and never calls the orchestrator without one", async () => {
    const res = await server.request("/gateway/v1/agents");
    expect(res.status).toBe(401);
    expect(orchestrator.calls).toHaveLength(0);
  });
});

describe("orchestrator errors become ours", () => {
  it("404 → NOT_FOUND with the orchestrator's message", async () => {
    const res = await server.request("/gateway/v1/agents/ghost", { headers: bearer(token) });
    expect(res.status).toBe(404);
    expect(res.body.error.message).toBe("Agent 'ghost' not found");
  });

  it("409 → CONFLICT on create of an existing name", async () => {
    await createAgent("twice");
    const res = await createAgent("twice");
    expect(res.status).toBe(409);
    expect(res.body.error.message).toContain("already exists");
  });

  it("422 → BAD_REQUEST with the orchestrator's field message; 400 keeps its message", async () => {
    const res = await server.request("/gateway/v1/agents", {
      method: "POST",
      headers: bearer(token),
      json: { name: "m", model: "unknown-model" },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toBe("model: unknown model");
    await createAgent("nomsg");
    const commit = await server.request("/gateway/v1/agents/nomsg/commit", { method: "POST", headers: bearer(token), json: {} });
    expect(commit.status).toBe(400);
    expect(commit.body.error.message).toBe("commit message is required");
  });

  it("a 5xx on a POST is 502 naming the orchestrator, without a retry", async () => {
    await createAgent("p5");
    orchestrator.script("POST /agents/p5/pause", { kind: "error", status: 500, body: { detail: "database is down" } });
    const before = orchestrator.calls.length;
    const res = await server.request("/gateway/v1/agents/p5/pause", { method: "POST", headers: bearer(token) });
    expect(res.status).toBe(502);
    expect(res.body.error.message).toBe("The orchestrator failed (HTTP 500): database is down");
    expect(orchestrator.calls.length - before).toBe(1);
  });

  it("a GET is retried GATEWAY_MAX_RETRIES times on 5xx and network errors, then succeeds", async () => {
    await createAgent("flaky");
    orchestrator.script("GET /agents/flaky", { kind: "error", status: 503, body: "busy" });
    orchestrator.script("GET /agents/flaky", { kind: "network-error" });
    const res = await server.request("/gateway/v1/agents/flaky", { headers: bearer(token) });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe("flaky");
    expect(orchestrator.calls.filter((c) => c.path === "/agents/flaky")).toHaveLength(3);
  });

  it("a GET that keeps failing is 502 after 1 + GATEWAY_MAX_RETRIES attempts", async () => {
    orchestrator.script("GET /agents", { kind: "error", status: 502, body: { error: "upstream of upstream" } }, 3);
    const res = await server.request("/gateway/v1/agents", { headers: bearer(token) });
    expect(res.status).toBe(502);
    expect(res.body.error.message).toBe("The orchestrator failed (HTTP 502): upstream of upstream");
    expect(orchestrator.calls).toHaveLength(3);
  });

  it("a 4xx is not retried", async () => {
    await server.request("/gateway/v1/agents/missing/diff", { headers: bearer(token) });
    expect(orchestrator.calls).toHaveLength(1);
  });
});

describe("orchestrator down or slow", () => {
  let down: TestServer;
  let slow: TestServer;
  let downToken: string;
  let slowToken: string;

  beforeAll(async () => {
    const port = await freePortThatRefuses();
    down = await startTestServer({ ORCH_BASE_URL: `http://127.0.0.1:${port}`, GATEWAY_MAX_RETRIES: "0" });
    downToken = (await registerUser(down)).token;
    slow = await startTestServer({
      ORCH_BASE_URL: msw.url(ORCH),
      GATEWAY_TIMEOUT_SECONDS: "1",
      GATEWAY_MAX_RETRIES: "0",
      PLATFORM_SERVICE_KEY: "platform-service-key-0123456789",
    });
    slowToken = (await registerUser(slow)).token;
  });

  afterAll(async () => {
    await down?.close();
    await slow?.close();
  });

  it("an unreachable orchestrator is 502 with a clear message and no address", async () => {
    const res = await down.request("/gateway/v1/agents", { headers: bearer(downToken) });
    expect(res.status).toBe(502);
    expect(res.body.error.message).toBe("The orchestrator is unreachable (ECONNREFUSED)");
    expect(JSON.stringify(res.body)).not.toContain("127.0.0.1");
    const stream = await down.request("/gateway/v1/agents/x/stream", { headers: bearer(downToken) });
    expect(stream.status).toBe(502);
  });

  it("no answer within GATEWAY_TIMEOUT_SECONDS is 504, and the upstream request is aborted", async () => {
    orchestrator.script("GET /agents/sleepy", { kind: "hang" });
    const started = Date.now();
    const res = await slow.request("/gateway/v1/agents/sleepy", { headers: bearer(slowToken) });
    expect(res.status).toBe(504);
    expect(res.body.error.message).toBe("The orchestrator did not answer within 1 s");
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    await orchestrator.calls[0]!.aborted;
  });

  it("without SERVICE_JWT_SECRET the bearer is PLATFORM_SERVICE_KEY", async () => {
    orchestrator.agents.set("k", {
      id: "1",
      name: "k",
      model: "m",
      tools: [],
      status: "running",
      description: "",
      config: {},
      createdAt: "",
      updatedAt: "",
    });
    await slow.request("/gateway/v1/agents/k", { headers: bearer(slowToken) });
    expect(orchestrator.calls.at(-1)!.headers.get("authorization")).toBe("Bearer platform-service-key-0123456789");
  });
});

describe("GET /agents/{name}/stream relays the orchestrator's events", () => {
  it("each event arrives as it is sent, before the orchestrator finishes", async () => {
    await createAgent("streamer");
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    orchestrator.scriptStream("streamer", {
      events: [
        { type: "status", status: "running" },
        { type: "log", line: "compiling" },
        { type: "done", status: "idle" },
      ],
      hold,
      sendBeforeHold: 2,
    });
    const response = await fetch(server.url("/gateway/v1/agents/streamer/stream?since=5"), { headers: bearer(token) });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    expect(orchestrator.calls.at(-1)!.query.get("since")).toBe("5");
    expect(orchestrator.calls.at(-1)!.headers.get("accept")).toBe("text/event-stream");
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while ((text.match(/\n\n/g) ?? []).length < 2) text += decoder.decode((await reader.read()).value, { stream: true });
    // Two events relayed while the orchestrator still holds the third.
    expect(text).toBe('data: {"type":"status","status":"running"}\n\ndata: {"type":"log","line":"compiling"}\n\n');
    release();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(text.endsWith('data: {"type":"done","status":"idle"}\n\n')).toBe(true);
  });

  it("an error before the stream starts is an HTTP error, not a frame", async () => {
    const res = await server.request("/gateway/v1/agents/nobody/stream", { headers: bearer(token) });
    expect(res.status).toBe(404);
    expect(res.body.error.message).toBe("Agent 'nobody' not found");
  });

  it("a client that goes away aborts the orchestrator stream", async () => {
    await createAgent("quitter");
    const hold = new Promise<void>(() => undefined);
    orchestrator.scriptStream("quitter", { events: [{ type: "status" }, { type: "never" }], hold, sendBeforeHold: 1 });
    const controller = new AbortController();
    const response = await fetch(server.url("/gateway/v1/agents/quitter/stream"), { headers: bearer(token), signal: controller.signal });
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    await orchestrator.calls.at(-1)!.aborted;
    expect(orchestrator.calls.at(-1)!.path).toBe("/agents/quitter/stream");
  });
});
