import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { delay, http, HttpResponse } from "msw";
import { createOpenAiUpstream } from "../../../mocks/openai-upstream.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { runAdmin } from "../../../scripts/admin-commands.js";

/**
 * The model registry (docs/model-registry.md) over HTTP, with msw upstreams that fail, slow
 * down and recover; the 5-minute window and the probe cache are crossed with a faked clock.
 */

const BASE = "https://upstream.test/v1";
const MODELS = () => ({
  models: {
    "echo-a": { provider: "echo" },
    "up-1": { provider: "openai-compatible", baseURL: msw.url(BASE), upstreamModel: "m1", contextWindow: 32000 },
    "org/echo:b": { provider: "echo" },
    "nokey-1": { provider: "openai-compatible", baseURL: msw.url(BASE), apiKeyEnv: "REGISTRY_TEST_UNSET_KEY_VARIABLE" },
  },
});
const upstream = createOpenAiUpstream(BASE);
let probeMode: "ok" | "fail" | "slow" | "hang" = "ok";
let probes = 0;
const msw = mockUpstreams(
  ...upstream.handlers,
  http.get(`${BASE}/models`, async () => {
    probes += 1;
    if (probeMode === "fail") return HttpResponse.json({ error: "boom" }, { status: 503 });
    if (probeMode === "slow") await delay(300);
    if (probeMode === "hang") await delay(2_000);
    return HttpResponse.json({ object: "list", data: [{ id: "m1" }] });
  }),
);

let server: TestServer;
let operator: Record<string, string>;
let alice: Record<string, string>;
let bob: Record<string, string>;
const get = (path: string, headers = alice) => server.request(`/gateway/v1/model-registry/models${path}`, { headers });
const patch = (id: string, json: unknown, headers = operator) =>
  server.request(`/gateway/v1/model-registry/models/${encodeURIComponent(id)}`, { method: "PATCH", headers, json });
const chat = (model: string, headers = alice) =>
  server.request("/gateway/v1/chat/completions", {
    method: "POST",
    headers,
    json: { model, messages: [{ role: "user", content: "hello there" }] },
  });

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({
    MODELS_JSON: JSON.stringify(MODELS()),
    MODEL_HEALTH_TTL_SECONDS: "30",
    MODEL_HEALTH_PROBE_TIMEOUT_MS: "400",
  });
  const op = await registerUser(server);
  await runAdmin(["grant-operator", "--email", op.email], server.composition);
  operator = bearer(op.token);
  alice = bearer((await registerUser(server)).token);
  bob = bearer((await registerUser(server)).token);
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  await server.close();
  await msw.close();
});

describe("entries", () => {
  it("has an entry for every model the router serves, from the models document", async () => {
    const list = await get("");
    expect(list.status).toBe(200);
    expect(list.body.data.map((entry: { id: string }) => entry.id).sort()).toEqual(Object.keys(MODELS().models).sort());
    const up = list.body.data.find((entry: { id: string }) => entry.id === "up-1");
    expect(up).toMatchObject({
      provider: "openai-compatible",
      upstreamModel: "m1",
      contextWindow: 32000,
      status: "active",
      served: true,
      capabilities: { streaming: true, tools: true, vision: false },
    });
  });

  it("answers GET by id for users of two tenants alike, and the same 404 for an unknown id", async () => {
    for (const who of [alice, bob]) {
      expect((await get("/up-1", who)).body).toMatchObject({ id: "up-1" });
      expect((await get(`/${encodeURIComponent("org/echo:b")}`, who)).body).toMatchObject({ id: "org/echo:b" });
      const missing = await get("/no-such-model", who);
      expect(missing.status).toBe(404);
      expect(JSON.stringify(missing.body)).toContain("Model not found in the registry: no-such-model");
      expect((await get("/no-such-model/health", who)).status).toBe(404);
    }
    expect((await patch("no-such-model", { displayName: "x" })).status).toBe(404);
  });

  it("lets operators add and update entries; others get 403; bad input is 400", async () => {
    const created = await server.request("/gateway/v1/model-registry/models", {
      method: "POST",
      headers: operator,
      json: {
        id: "vendor/big-1",
        displayName: "Big One",
        provider: "vendor",
        contextWindow: 200000,
        maxOutputTokens: 8192,
        price: { input: 3, output: 15 },
        modalities: { input: ["text", "image"], output: ["text"] },
        capabilities: { vision: true },
        tags: ["large"],
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: "vendor/big-1",
      served: false,
      capabilities: { streaming: true, tools: false, vision: true },
      tags: ["large"],
    });
    expect(
      (await server.request("/gateway/v1/model-registry/models", { method: "POST", headers: operator, json: { id: "vendor/big-1" } }))
        .status,
    ).toBe(409);
    expect(
      (await server.request("/gateway/v1/model-registry/models", { method: "POST", headers: alice, json: { id: "x-1" } })).status,
    ).toBe(403);
    expect((await patch("up-1", { displayName: "Nope" }, bob)).status).toBe(403);
    const renamed = await patch("up-1", { displayName: "Upstream One", tags: ["fast"] });
    expect(renamed.body).toMatchObject({ displayName: "Upstream One", tags: ["fast"], upstreamModel: "m1" });
    for (const body of [{ status: "retired" }, { contextWindow: -5 }, { price: { input: "free" } }, { tags: ["Bad Tag"] }]) {
      expect((await patch("up-1", body)).status, JSON.stringify(body)).toBe(400);
    }
    expect((await get("?tag=fast")).body.data.map((entry: { id: string }) => entry.id)).toEqual(["up-1"]);
  });

  it("disabled: the router refuses the model with the 403 listing usable ids; deprecated: a warning header", async () => {
    expect((await chat("echo-a")).status).toBe(200);
    expect((await patch("echo-a", { status: "disabled" })).body.status).toBe("disabled");
    const refused = await chat("echo-a");
    expect(refused.status).toBe(403);
    const message = JSON.stringify(refused.body);
    expect(message).toContain("not available");
    expect(message).toContain("up-1");
    expect(message).not.toMatch(/Usable models:[^"]*echo-a/);
    await patch("echo-a", { status: "deprecated", statusNote: "use up-1 instead" });
    const warned = await chat("echo-a");
    expect(warned.status).toBe(200);
    expect(warned.headers.get("deprecation")).toMatch(/^@\d+$/);
    expect(warned.headers.get("x-model-warning")).toBe("The model 'echo-a' is deprecated: use up-1 instead");
    await patch("echo-a", { status: "active" });
    const plain = await chat("echo-a");
    expect(plain.headers.get("deprecation")).toBeNull();
  });
});

describe("health", () => {
  it("the echo model is always healthy", async () => {
    const health = await get("/echo-a/health", bob);
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ id: "echo-a", status: "healthy" });
  });

  it("says a model's upstream credentials are missing without naming the operator's variable", async () => {
    const before = probes;
    const health = await get("/nokey-1/health", bob);
    expect(health.status).toBe(200);
    expect(health.body.active).toMatchObject({ ok: false, error: "not configured: the model's upstream credentials are not set" });
    expect(JSON.stringify(health.body)).not.toContain("REGISTRY_TEST_UNSET_KEY_VARIABLE");
    expect(probes).toBe(before);
  });

  it("probes the upstream, caches the probe for MODEL_HEALTH_TTL_SECONDS, and follows it failing, slowing down and recovering", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const ttl = () => vi.setSystemTime(Date.now() + 31_000);
    probeMode = "ok";
    ttl();
    const before = probes;
    const healthy = await get("/up-1/health");
    expect(healthy.body).toMatchObject({ status: "healthy", active: { ok: true, cached: false } });
    expect(probes).toBe(before + 1);
    probeMode = "fail";
    const cached = await get("/up-1/health", bob);
    expect(cached.body).toMatchObject({ status: "healthy", active: { cached: true } });
    expect(probes).toBe(before + 1);
    ttl();
    const down = await get("/up-1/health");
    expect(down.body.status).toBe("down");
    expect(down.body.lastError.message).toContain("503");
    probeMode = "slow";
    ttl();
    const slow = await get("/up-1/health");
    expect(slow.body.status).toBe("degraded");
    expect(slow.body.active.latencyMs).toBeGreaterThanOrEqual(200);
    probeMode = "hang";
    ttl();
    const hung = await get("/up-1/health");
    expect(hung.body.status).toBe("down");
    expect(hung.body.active.error).toContain("400 ms");
    probeMode = "ok";
    ttl();
    expect((await get("/up-1/health")).body.status).toBe("healthy");
  });

  it("judges the last 5 minutes of real traffic: error rate, latency and TTFT percentiles", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    probeMode = "ok";
    vi.setSystemTime(Date.now() + 10 * 60_000);
    upstream.script("m1", { kind: "reply", words: ["a", "b"] });
    for (let i = 0; i < 4; i += 1) expect((await chat("up-1")).status).toBe(200);
    const ok = await get("/up-1/health");
    expect(ok.body.status).toBe("healthy");
    expect(ok.body.passive).toMatchObject({ windowSeconds: 300, requests: 4, errors: 0, errorRate: 0 });
    expect(ok.body.passive.latencyMs.p50).toEqual(expect.any(Number));
    expect(ok.body.passive.ttftMs.p95).toEqual(expect.any(Number));

    upstream.script("m1", { kind: "error", status: 500, body: { error: { message: "upstream exploded", type: "server_error" } } });
    for (let i = 0; i < 6; i += 1) expect((await chat("up-1", bob)).status).toBe(500);
    // Client mistakes say nothing about the upstream's health.
    upstream.script("m1", { kind: "error", status: 400, body: { error: { message: "bad request", type: "invalid_request_error" } } });
    expect((await chat("up-1")).status).toBe(400);
    const failing = await get("/up-1/health");
    expect(failing.body.status).toBe("down");
    expect(failing.body.passive).toMatchObject({ requests: 10, errors: 6 });
    expect(failing.body.lastError.message).toContain("500");

    // Recovered upstream, and the failures age out of the window.
    upstream.script("m1", { kind: "reply", words: ["ok"] });
    vi.setSystemTime(Date.now() + 5 * 60_000 + 1_000);
    expect((await chat("up-1")).status).toBe(200);
    const recovered = await get("/up-1/health");
    expect(recovered.body.status).toBe("healthy");
    expect(recovered.body.passive).toMatchObject({ requests: 1, errors: 0 });
    expect(recovered.body.lastError.message).toContain("500");
  });
});
