import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { http, HttpResponse } from "msw";
import { callSignal } from "../../../mocks/call-signal.js";
import { createOpenAiEmbeddingsUpstream } from "../../../mocks/openai-embeddings-upstream.js";
import { mockVector } from "../../../mocks/embedding-vectors.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { openaiClient, platformAccount, usageOf } from "../../helpers/chat.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";

/**
 * The rules of `POST /embeddings` (docs/embeddings.md): bad input is 400 in each surface's
 * envelope and holds nothing; a chat model for embeddings and an embedding model for chat are
 * 400 naming the model; the model must be one the caller may use (403 with the usable embedding
 * ids); the Platform API has no embeddings; `/rpc` and OpenAPI carry both methods; deployments
 * retry and fall back, billed at the answering deployment's price; upstream keys appear in no
 * answer and no log line; the plan allowance is exact under concurrency on two instances.
 */

const UPSTREAM = "https://embeddings.upstream.test/v1";
const SECRET = "sk-upstream-never-shown-0123456789";
const upstream = createOpenAiEmbeddingsUpstream(UPSTREAM);
// A provider that answers only once its caller has gone: what a client that leaves early meets.
const SLOW = "https://slow.upstream.test/v1";
const slow = { calls: 0, aborted: 0 };
const slowHandler = http.post(`${SLOW}/embeddings`, async ({ request }) => {
  slow.calls++;
  const signal = callSignal(request);
  await new Promise((resolve) => (signal.aborted ? resolve(undefined) : signal.addEventListener("abort", resolve, { once: true })));
  slow.aborted++;
  return HttpResponse.error();
});
const msw = mockUpstreams(...upstream.handlers, slowHandler);

const PLANS = {
  free: { name: "Free", tokensPerWindow: 1_000_000, windowSeconds: 3600 },
  pro: { name: "Pro", tokensPerWindow: 1_000_000, windowSeconds: 3600 },
  small: { name: "Small", tokensPerWindow: 30, windowSeconds: 3600 },
};

const models = () => ({
  "echo-1": { provider: "echo" },
  "echo-embed": { provider: "echo", mode: "embedding", price: { input: 10, output: 0 } },
  "hidden-embed": { provider: "echo", mode: "embedding", public: false },
  "pro-embed": { provider: "echo", mode: "embedding", plans: ["pro"] },
  "gemini-embed": { provider: "gemini", mode: "embedding", baseURL: "https://gemini.invalid/v1beta" },
  // The first deployment is tried first (the second has weight 0: used only when the other failed).
  "emb-routed": {
    mode: "embedding",
    deployments: [
      {
        provider: "openai-compatible",
        baseURL: msw.url(UPSTREAM),
        apiKeyEnv: "EMB_RULES_KEY",
        upstreamModel: "first",
        price: { input: 50, output: 0 },
      },
      {
        provider: "openai-compatible",
        baseURL: msw.url(UPSTREAM),
        apiKeyEnv: "EMB_RULES_KEY",
        upstreamModel: "second",
        weight: 0,
        price: { input: 70, output: 0 },
      },
    ],
  },
  "emb-primary": {
    provider: "openai-compatible",
    mode: "embedding",
    baseURL: msw.url(UPSTREAM),
    apiKeyEnv: "EMB_RULES_KEY",
    upstreamModel: "primary",
    fallbacks: ["emb-backup"],
  },
  "emb-slow": { provider: "openai-compatible", mode: "embedding", baseURL: msw.url(SLOW) },
  "emb-backup": {
    provider: "openai-compatible",
    mode: "embedding",
    baseURL: msw.url(UPSTREAM),
    apiKeyEnv: "EMB_RULES_KEY",
    upstreamModel: "backup",
  },
});

let server: TestServer;
let alice: Awaited<ReturnType<typeof registerUser>>;
let aliceKey: string;

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("EMB_RULES_KEY", SECRET);
  server = await startTestServer({ PLANS_JSON: JSON.stringify(PLANS), MODELS_JSON: JSON.stringify({ models: models() }) });
  alice = await registerUser(server);
  aliceKey = (await server.request("/account/v1/keys", { method: "POST", headers: bearer(alice.token), json: { name: "rules" } })).body.key;
});

afterAll(async () => {
  await msw.close();
  vi.unstubAllEnvs();
  await server?.close();
});

beforeEach(() => upstream.reset());

const SURFACES = [
  ["Gateway", "/gateway/v1", () => alice.token],
  ["Account", "/account/v1", () => aliceKey],
] as const;

const embedOn = (base: string, token: string, json: unknown) =>
  server.request(`${base}/embeddings`, { method: "POST", headers: bearer(token), json });

/** The 400 body of a surface: OpenAI's `{error: {message, type}}` on the Account API, the Gateway's `{error: {code, message, requestId}}`. */
function expect400(surface: string, res: { status: number; body: any }, message: RegExp) {
  expect(res.status).toBe(400);
  if (surface === "Account") {
    expect(res.body).toEqual({ error: { message: expect.stringMatching(message), type: "invalid_request_error" } });
  } else {
    expect(res.body.error).toMatchObject({
      code: "VALIDATION_FAILED",
      message: expect.stringMatching(message),
      requestId: expect.any(String),
    });
  }
}

const BAD: [string, Record<string, unknown>, RegExp][] = [
  ["an empty string", { model: "echo-embed", input: "" }, /input.*empty string/],
  ["an empty array", { model: "echo-embed", input: [] }, /input must be a non-empty string/],
  ["an empty string among strings", { model: "echo-embed", input: ["fine", ""] }, /input\.1.*empty string/],
  ["too many inputs", { model: "echo-embed", input: Array.from({ length: 2049 }, () => "x") }, /at most 2048/],
  ["a number", { model: "echo-embed", input: 42 }, /input must be a non-empty string/],
  ["strings and token ids mixed", { model: "echo-embed", input: [1, "a"] }, /input must be a non-empty string/],
  ["a negative token id", { model: "echo-embed", input: [[3, -1]] }, /token ids are not negative/],
  ["no input", { model: "echo-embed" }, /input is required/],
  ["no model", { input: "hello" }, /model is required/],
  ["dimensions 0", { model: "echo-embed", input: "hello", dimensions: 0 }, /dimensions must be at least 1/],
  ["dimensions as text", { model: "echo-embed", input: "hello", dimensions: "8" }, /dimensions must be an integer/],
  ["an unknown encoding", { model: "echo-embed", input: "hello", encoding_format: "hex" }, /encoding_format must be "float" or "base64"/],
  [
    "a chat model",
    { model: "echo-1", input: "hello" },
    /'echo-1' is a chat model, not an embedding model\. Embedding models: echo-embed, /,
  ],
  ["token ids to a text-only provider", { model: "gemini-embed", input: [[1, 2]] }, /'gemini-embed' embeds text only/],
  [
    "more numbers than echo answers",
    { model: "echo-embed", input: Array.from({ length: 2048 }, () => "x"), dimensions: 1024 },
    /at most 1048576 numbers/,
  ],
];

for (const [surface, base, credential] of SURFACES) {
  describe(`bad input on the ${surface} API`, () => {
    it.each(BAD)("%s: 400 in the surface's envelope, nothing held or charged", async (_name, json, message) => {
      const before = await usageOf(server, alice.token, "echo-embed");
      const used = (await server.request("/account/v1/models", { headers: bearer(aliceKey) })).body.plan.used;
      expect400(surface, await embedOn(base, credential(), json), message);
      expect((await server.request("/account/v1/models", { headers: bearer(aliceKey) })).body.plan.used).toBe(used);
      expect((await usageOf(server, alice.token, "echo-embed")).requests).toBe(before.requests);
    });
  });
}

describe("models of the other mode, and models the caller may not use", () => {
  it("an embedding model for chat is 400 naming it, on every chat route", async () => {
    const chat = { model: "echo-embed", messages: [{ role: "user", content: "hi" }] };
    for (const [surface, base, credential] of SURFACES)
      expect400(
        surface,
        await server.request(`${base}/chat/completions`, { method: "POST", headers: bearer(credential()), json: chat }),
        /'echo-embed' is an embedding model, not a chat model \(embeddings: POST \/embeddings on the Account and Gateway APIs\)\. Chat models: echo-1/,
      );
    const responses = await server.request("/gateway/v1/responses", {
      method: "POST",
      headers: bearer(alice.token),
      json: { model: "echo-embed", input: "hi" },
    });
    expect(responses.status).toBe(400);
    const messages = await server.request("/gateway/v1/messages", {
      method: "POST",
      headers: bearer(alice.token),
      json: { model: "echo-embed", max_tokens: 10, messages: [{ role: "user", content: "hi" }] },
    });
    expect(messages.status).toBe(400);
    expect(messages.body).toMatchObject({
      type: "error",
      error: { message: expect.stringContaining("'echo-embed' is an embedding model") },
    });
    const platform = await platformAccount(server, 1);
    const refused = await server.request("/api/v1/chat/completions", { method: "POST", headers: bearer(platform.key), json: chat });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({
      type: "invalid_request_error",
      message: expect.stringContaining("'echo-embed' is an embedding model"),
    });
  });

  it("a model that is not public and an unknown one give the same 403 listing the usable embedding models", async () => {
    for (const [, base, credential] of SURFACES) {
      const hidden = await embedOn(base, credential(), { model: "hidden-embed", input: "hi" });
      const unknown = await embedOn(base, credential(), { model: "no-such-model", input: "hi" });
      expect(hidden.status).toBe(403);
      expect(unknown.status).toBe(403);
      // The Account API's 403 is its flat `{error, code}` (docs/interface.md 7.1).
      const message = (res: { body: any }) => (typeof res.body.error === "string" ? res.body.error : res.body.error.message) as string;
      expect(message(hidden)).toBe(
        "The model 'hidden-embed' is not available on this API. Usable models: echo-embed, pro-embed, gemini-embed, emb-routed, emb-primary, emb-slow, emb-backup",
      );
      expect(message(unknown)).toBe(message(hidden).replace("hidden-embed", "no-such-model"));
    }
  });

  it("a model outside the caller's plan is 403 naming the plan; a key without scope intelligence is 403; no key is 401", async () => {
    const outside = await embedOn("/gateway/v1", alice.token, { model: "pro-embed", input: "hi" });
    expect(outside.status).toBe(403);
    expect(outside.body.error.message).toMatch(
      /^The model 'pro-embed' is not included in the free plan\. Usable models: echo-embed, gemini-embed, emb-routed, emb-primary, emb-slow, emb-backup$/,
    );
    const compute = await server.request("/account/v1/keys", {
      method: "POST",
      headers: bearer(alice.token),
      json: { name: "compute", scopes: ["compute"] },
    });
    const scoped = await embedOn("/account/v1", compute.body.key, { model: "echo-embed", input: "hi" });
    expect(scoped.status).toBe(403);
    expect(scoped.body).toEqual({ error: expect.any(String), code: "INSUFFICIENT_CAPABILITY" });
    expect((await server.request("/account/v1/embeddings", { method: "POST", json: { model: "echo-embed", input: "hi" } })).status).toBe(
      401,
    );
    expect((await server.request("/gateway/v1/embeddings", { method: "POST", json: { model: "echo-embed", input: "hi" } })).status).toBe(
      401,
    );
  });
});

describe("where embeddings are served", () => {
  it("the Platform API answers /embeddings as an unknown route (docs/interface.md 4.2)", async () => {
    const platform = await platformAccount(server, 1);
    const embeddings = await server.request("/api/v1/embeddings", {
      method: "POST",
      headers: bearer(platform.key),
      json: { model: "echo-embed", input: "hi" },
    });
    const unknown = await server.request("/api/v1/no-such-route", {
      method: "POST",
      headers: bearer(platform.key),
      json: { model: "echo-embed", input: "hi" },
    });
    expect(embeddings.status).toBe(404);
    expect(embeddings.status).toBe(unknown.status);
    expect(JSON.stringify(embeddings.body).replace("embeddings", "X")).toBe(JSON.stringify(unknown.body).replace("no-such-route", "X"));
  });

  it("POST /rpc calls both methods by name; bad params are -32602", async () => {
    const gatewayKey = (
      await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(alice.token), json: { name: "rpc" } })
    ).body.key;
    const rpc = (token: string, method: string, params: unknown) =>
      server.request("/rpc", { method: "POST", headers: bearer(token), json: { jsonrpc: "2.0", id: 1, method, params } });
    const answer = await rpc(gatewayKey, "gateway.embeddings.create", { model: "echo-embed", input: ["a b", "c"], dimensions: 16 });
    expect(answer.body.result).toMatchObject({ object: "list", model: "echo-embed", data: [{ index: 0 }, { index: 1 }] });
    expect(answer.body.result.data[0].embedding).toHaveLength(16);
    const account = await rpc(aliceKey, "account.embeddings.create", { model: "echo-embed", input: "a b", encoding_format: "base64" });
    expect(typeof account.body.result.data[0].embedding).toBe("string");
    const bad = await rpc(gatewayKey, "gateway.embeddings.create", { model: "echo-embed", input: [] });
    expect(bad.body.error.code).toBe(-32602);
  });

  it("OpenAPI documents POST /embeddings on the Account and Gateway APIs only", async () => {
    const paths = (await server.request("/openapi.json")).body.paths as Record<string, Record<string, unknown>>;
    expect(paths["/account/v1/embeddings"]?.post).toBeDefined();
    expect(paths["/gateway/v1/embeddings"]?.post).toBeDefined();
    expect(
      Object.keys(paths)
        .filter((path) => path.endsWith("/embeddings"))
        .sort(),
    ).toEqual(["/account/v1/embeddings", "/gateway/v1/embeddings"]);
  });
});

describe("routing", () => {
  const client = () => openaiClient(server, "/gateway/v1", alice.token);

  it("a retryable failure of one deployment is answered by the other, billed at its price", async () => {
    upstream.fail("first", { status: 500, body: { error: { message: "The server had an error", type: "server_error" } } });
    const answer = await client().embeddings.create(
      { model: "emb-routed", input: "routed text", encoding_format: "float" },
      { headers: { "x-request-id": "emb-routed-1" } },
    );
    expect(upstream.calls.map((call) => call.body.model)).toEqual(["first", "second"]);
    expect(answer.data[0]!.embedding).toEqual(mockVector("routed text", 8));
    const tokens = "routed text".length;
    expect(server.logs().find((line) => line.clientRequestId === "emb-routed-1" && line.costMicrocredits !== undefined)).toMatchObject({
      model: "emb-routed",
      inputTokens: tokens,
      costMicrocredits: Math.ceil((tokens * 70) / 1000),
    });
  });

  it("a model whose deployments failed falls back to another embedding model; the answer keeps the id asked for", async () => {
    upstream.fail("primary", { status: 503, body: { error: { message: "overloaded" } } });
    const answer = await client().embeddings.create({ model: "emb-primary", input: "fallback text", encoding_format: "float" });
    expect(upstream.calls.map((call) => call.body.model)).toEqual(["primary", "backup"]);
    expect(answer.model).toBe("emb-primary");
    expect(answer.data[0]!.embedding).toEqual(mockVector("fallback text", 8));
  });

  it("a 4xx of the request's own is relayed verbatim, not retried; the upstream key is in no answer and no log line", async () => {
    upstream.fail("first", {
      status: 400,
      body: { error: { message: "This model's maximum context length is 8192 tokens", type: "invalid_request_error", code: null } },
    });
    const refused = await embedOn("/gateway/v1", alice.token, { model: "emb-routed", input: "too long" });
    expect(refused.status).toBe(400);
    expect(upstream.calls).toHaveLength(1);
    expect(refused.body.error.message).toBe("This model's maximum context length is 8192 tokens");
    const answered = await embedOn("/gateway/v1", alice.token, { model: "emb-routed", input: "fine" });
    expect(answered.status).toBe(200);
    expect(upstream.calls.at(-1)!.headers.get("authorization")).toBe(`Bearer ${SECRET}`);
    expect(JSON.stringify([refused, answered])).not.toContain(SECRET);
    expect(server.rawLogs.join("\n")).not.toContain(SECRET);
  });
});

describe("no charge without an answer", () => {
  it("a client that leaves while the provider works holds its tokens until then, and is charged and counted nothing", async () => {
    const { ledger } = server.composition.ports.repos;
    const plan = () => ledger.state(ledger.planTokens(alice.user.id, PLANS.free.windowSeconds * 1000));
    const before = await plan();
    const requests = (await usageOf(server, alice.token, "emb-slow")).requests;
    const controller = new AbortController();
    const pending = fetch(server.url("/gateway/v1/embeddings"), {
      method: "POST",
      headers: { ...bearer(alice.token), "content-type": "application/json" },
      body: JSON.stringify({ model: "emb-slow", input: "one two three four" }),
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await vi.waitFor(() => expect(slow.calls).toBe(1));
    expect((await plan()).held - before.held).toBe(4);
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    // The gateway's call to the provider is cancelled with it.
    await vi.waitFor(() => expect(slow.aborted).toBe(1));
    await vi.waitFor(async () => expect(await plan()).toMatchObject({ value: before.value, held: before.held }));
    expect((await usageOf(server, alice.token, "emb-slow")).requests).toBe(requests);
  });
});

describe("two users of two tenants", () => {
  it("each sees only their own embeddings in the usage reports, by model, key and surface", async () => {
    const bob = await registerUser(server);
    const bobKey = (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(bob.token), json: { name: "bob" } }))
      .body;
    const before = await usageOf(server, alice.token, "echo-embed");
    expect((await embedOn("/gateway/v1", bobKey.key, { model: "echo-embed", input: "bob's words here" })).status).toBe(200);
    await vi.waitFor(async () => expect((await usageOf(server, bob.token, "echo-embed")).requests).toBe(1));
    expect((await usageOf(server, alice.token, "echo-embed")).requests).toBe(before.requests);
    const keys = (await server.request("/gateway/v1/usage/keys", { headers: bearer(bob.token) })).body.rows;
    expect(keys).toEqual([expect.objectContaining({ keyId: bobKey.id, requests: 1, inputTokens: 5 })]);
    const surfaces = (await server.request("/gateway/v1/billing/usage", { headers: bearer(bob.token) })).body.surfaces;
    expect(surfaces).toEqual([expect.objectContaining({ surface: "gateway", requests: 1 })]);
    expect((await server.request("/gateway/v1/usage/models", { headers: bearer(alice.token) })).body.tenantId).not.toBe(
      (await server.request("/gateway/v1/usage/models", { headers: bearer(bob.token) })).body.tenantId,
    );
  });
});

describe("the plan allowance on two instances sharing Redis", () => {
  const prefix = uniqueRedisPrefix();
  let a: TestServer;
  let b: TestServer;

  beforeAll(async () => {
    const env = {
      STORAGE: "redis",
      REDIS_PREFIX: prefix,
      PLANS_JSON: JSON.stringify(PLANS),
      MODELS_JSON: JSON.stringify({ models: { "echo-embed": models()["echo-embed"] } }),
    };
    a = await startTestServer(env);
    b = await startTestServer(env);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await dropRedisPrefix(prefix);
  });

  it("eight concurrent requests of 10 tokens on a 30-token allowance: exactly three are served, the rest 429 insufficient_quota", async () => {
    const user = await registerUser(a);
    const record = (await a.composition.ports.repos.users.get(user.user.id))!;
    await a.composition.ports.repos.users.put({ ...record, plan: "small" });
    const input = "one two three four five six seven eight nine ten";
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 ? b : a).request("/gateway/v1/embeddings", {
          method: "POST",
          headers: bearer(user.token),
          json: { model: "echo-embed", input },
        }),
      ),
    );
    expect(answers.filter((res) => res.status === 200)).toHaveLength(3);
    for (const res of answers.filter((res) => res.status !== 200)) {
      expect(res.status).toBe(429);
      expect(res.body.error.message).toMatch(/Small plan/);
    }
    await vi.waitFor(async () => {
      const { ledger } = a.composition.ports.repos;
      const state = await ledger.state(ledger.planTokens(user.user.id, PLANS.small.windowSeconds * 1000));
      expect(state).toMatchObject({ value: 30, held: 0 });
    });
  });
});
