import { createServer } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import OpenAI, { type APIError } from "openai";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { loopbackFetch, openaiClient, platformAccount, sseData, userMessage, type PlatformAccount } from "../../helpers/chat.js";
import { createOpenAiUpstream } from "../../../mocks/openai-upstream.js";
import { serveMockUpstreams, type MockUpstreams } from "../../helpers/mock-upstreams.js";
import { createKey } from "../../../rpc/keys/create-key.js";
import { countPromptTokens, countTokens } from "../../../rpc/chat/tokens.js";

/** docs/interface.md 4.2, 7.2 and the model router (docs/architecture.md "Models"), through the official client. */

const UPSTREAM = "http://models.upstream.test/v1";
const upstream = createOpenAiUpstream(UPSTREAM);
let msw: MockUpstreams;

/** A free loopback port with nothing listening: an unreachable provider. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

const KEY_ENV = "CHAT_TEST_UPSTREAM_KEY";

let models: Record<string, unknown>;
let server: TestServer;
let account: PlatformAccount;
let client: OpenAI;

beforeAll(async () => {
  msw = await serveMockUpstreams(...upstream.handlers);
  process.env[KEY_ENV] = "upstream-secret-123";
  models = {
    "local-echo": { provider: "echo", ownedBy: "house", contextWindow: 4096 },
    "remote-a": {
      provider: "openai-compatible",
      baseURL: msw.url(UPSTREAM),
      apiKeyEnv: KEY_ENV,
      upstreamModel: "vendor-a",
      contextWindow: 128000,
      ownedBy: "vendor",
    },
    "remote-slow": { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), upstreamModel: "vendor-slow", timeoutSeconds: 0.3 },
    "remote-down": { provider: "openai-compatible", baseURL: `http://127.0.0.1:${await closedPort()}/v1` },
    "remote-nokey": { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), apiKeyEnv: "CHAT_TEST_UNSET_KEY_VARIABLE" },
    "internal-only": { provider: "echo", public: false },
  };
  server = await startTestServer({ MODELS_JSON: JSON.stringify({ models }) });
  account = await platformAccount(server);
  client = openaiClient(server, "/api/v1", account.key);
});
afterEach(() => upstream.reset());
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
  await msw.close();
  delete process.env[KEY_ENV];
});

const chat = (json: unknown, key = account.key, headers: Record<string, string> = {}) =>
  server.request("/api/v1/chat/completions", { method: "POST", headers: { ...bearer(key), ...headers }, json });

async function rawStream(json: unknown, key = account.key) {
  const response = await loopbackFetch(server.url("/api/v1/chat/completions"), {
    method: "POST",
    headers: { ...bearer(key), "content-type": "application/json" },
    body: JSON.stringify(json),
  });
  return { response, frames: sseData(await response.text()) };
}

describe("GET /api/v1/models (docs/interface.md 2.1)", () => {
  it("lists every configured model, public or not, as a list object", async () => {
    const page = await client.models.list();
    const ids = page.data.map((entry) => entry.id).sort();
    expect(ids).toEqual(Object.keys(models).sort());
    const remote = page.data.find((entry) => entry.id === "remote-a") as unknown as Record<string, unknown>;
    expect(remote).toMatchObject({ object: "model", owned_by: "vendor", context_window: 128000 });
    expect(page.data.find((entry) => entry.id === "local-echo")).toMatchObject({ owned_by: "house", context_window: 4096 });

    const raw = await server.request("/api/v1/models", { headers: bearer(account.key) });
    expect(raw.status).toBe(200);
    expect(raw.body.object).toBe("list");
    expect(raw.headers.get("x-service-request-id")).toBeNull();
  });
});

describe("POST /api/v1/chat/completions", () => {
  it("answers a chat.completion with usage and X-Service-Request-Id", async () => {
    const { data: completion, response } = await client.chat.completions
      .create({ model: "local-echo", messages: userMessage("one two three") })
      .withResponse();
    expect(completion).toMatchObject({
      object: "chat.completion",
      model: "local-echo",
      choices: [{ message: { role: "assistant", content: "one two three" }, finish_reason: "stop" }],
    });
    expect(completion.id).toEqual(expect.any(String));
    // The echo model counts real tokens: the prompt's framing plus the three words.
    expect(completion.usage).toEqual({
      prompt_tokens: countPromptTokens(userMessage("one two three")),
      completion_tokens: 3,
      total_tokens: countPromptTokens(userMessage("one two three")) + 3,
    });
    expect(response.headers.get("x-service-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    // docs/interface.md 4.2: the only service-specific header.
    expect(response.headers.get("x-request-id")).toBeNull();
  });

  it("streams chunk frames with text/event-stream, no-cache and a final data: [DONE]", async () => {
    const stream = await client.chat.completions.create({
      model: "local-echo",
      messages: userMessage("alpha beta gamma delta"),
      stream: true,
    });
    const deltas: string[] = [];
    for await (const chunk of stream) {
      expect(chunk.object).toBe("chat.completion.chunk");
      expect(chunk.model).toBe("local-echo");
      const content = chunk.choices[0]?.delta.content;
      if (content) deltas.push(content);
    }
    // word by word
    expect(deltas).toEqual(["alpha", " beta", " gamma", " delta"]);

    const { response, frames } = await rawStream({ model: "local-echo", messages: userMessage("alpha beta"), stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(response.headers.get("cache-control")).toBe("no-cache");
    expect(response.headers.get("x-service-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(frames.at(-1)).toBe("[DONE]");
    const chunks = frames.slice(0, -1).map((frame) => JSON.parse(frame));
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk")).toBe(true);
    // The client did not ask for usage: no chunk carries it.
    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
  });

  it("drops stream_options like every field outside the six: no usage chunk, never a 400", async () => {
    const stream = await client.chat.completions.create({
      model: "local-echo",
      messages: userMessage("counted words here"),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe("counted words here");
    expect(chunks.some((chunk) => chunk.usage || chunk.choices.length === 0)).toBe(false);
    for (const stream_options of [{ include_usage: "yes" }, "nonsense", 42]) {
      const res = await rawStream({ model: "local-echo", messages: userMessage("x"), stream: true, stream_options });
      expect(res.response.status, JSON.stringify(stream_options)).toBe(200);
      expect(res.frames.at(-1)).toBe("[DONE]");
    }
  });

  it("forwards only the six fields upstream; tools, n, seed, response_format and others are dropped without error", async () => {
    const extra = {
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
      tool_choice: "auto",
      n: 3,
      seed: 42,
      response_format: { type: "json_object" },
      stop: ["x"],
      logprobs: true,
      presence_penalty: 1,
      frequency_penalty: 1,
      user: "someone",
    };
    const completion = await client.chat.completions.create({
      model: "remote-a",
      messages: userMessage("forward me"),
      temperature: 0.5,
      top_p: 0.9,
      max_tokens: 50,
      ...(extra as object),
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(completion.choices[0]!.message.content).toBe("forward me");
    expect(completion.model).toBe("remote-a");
    expect(upstream.calls).toHaveLength(1);
    const sent = upstream.calls[0]!;
    expect(sent.body).toEqual({
      model: "vendor-a",
      messages: [{ role: "user", content: "forward me" }],
      temperature: 0.5,
      top_p: 0.9,
      max_tokens: 50,
    });
    // The upstream key comes from the environment variable named in the models config.
    expect(sent.headers?.get("authorization")).toBe("Bearer upstream-secret-123");

    const stream = await client.chat.completions.create({
      model: "remote-a",
      messages: userMessage("stream me"),
      stream: true,
      ...(extra as object),
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    for await (const _chunk of stream) {
      // drain
    }
    // Exactly the six fields, streamed too (spec 4.2): the stream is billed on the service's own
    // count unless the model's config asks the upstream for usage (streamUsage).
    expect(upstream.calls[1]!.body).toEqual({
      model: "vendor-a",
      messages: [{ role: "user", content: "stream me" }],
      stream: true,
    });
    await vi.waitFor(() =>
      expect(
        server
          .logs()
          .filter((line) => line.operation === "platform.chat.completions")
          .at(-1),
      ).toMatchObject({
        usageEstimated: true,
        outputTokens: 2,
      }),
    );
  });

  it("relays upstream chunks as they arrive: the first reaches the client before the upstream finishes", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    upstream.script("vendor-a", { kind: "stream", words: ["first", " second", " last"], holdBeforeEnd: held });
    const stream = await client.chat.completions.create({ model: "remote-a", messages: userMessage("x"), stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    const seen: string[] = [];
    while (!seen.includes(" second")) {
      const { value } = await iterator.next();
      const content = value!.choices[0]?.delta.content;
      if (content) seen.push(content);
    }
    // The upstream is still holding its last word: what the client has so far was relayed live.
    expect(seen).toEqual(["first", " second"]);
    release();
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
      const content = next.value.choices[0]?.delta.content;
      if (content) seen.push(content);
    }
    expect(seen).toEqual(["first", " second", " last"]);
  });

  it("aborts the upstream request when the client disconnects while a JSON answer is awaited", async () => {
    upstream.script("vendor-a", { kind: "hang" });
    const controller = new AbortController();
    const pending = client.chat.completions
      .create({ model: "remote-a", messages: userMessage("x") }, { signal: controller.signal })
      .catch((error: unknown) => error);
    await vi.waitFor(() => expect(upstream.calls).toHaveLength(1));
    expect(upstream.calls[0]!.wasAborted()).toBe(false);
    controller.abort();
    expect(await pending).toBeInstanceOf(OpenAI.APIUserAbortError);
    await upstream.calls[0]!.aborted; // the provider's socket closed
    expect(upstream.calls[0]!.wasAborted()).toBe(true);
  });

  it("reuses kept-alive provider connections for JSON answers and finished streams", async () => {
    for (let i = 0; i < 3; i++) await client.chat.completions.create({ model: "remote-a", messages: userMessage("warm up") });
    const accepted = msw.acceptedConnections();
    for (let i = 0; i < 10; i++) {
      const completion = await client.chat.completions.create({ model: "remote-a", messages: userMessage(`hello ${i}`) });
      expect(completion.choices[0]!.message.content).toBe(`hello ${i}`);
      const stream = await client.chat.completions.create({ model: "remote-a", messages: userMessage(`streamed ${i}`), stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      expect(text).toBe(`streamed ${i}`);
    }
    // Twenty sequential calls later the pool has not opened a connection per call.
    expect(msw.acceptedConnections() - accepted).toBeLessThanOrEqual(1);
    expect(upstream.calls.every((call) => !call.wasAborted())).toBe(true);
  });

  it("aborts the upstream request when the client disconnects mid-stream", async () => {
    upstream.script("vendor-a", { kind: "stream", words: ["a", " b", " c"], hangAfter: 1 });
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model: "remote-a", messages: userMessage("x"), stream: true },
      { signal: controller.signal },
    );
    const iterator = stream[Symbol.asyncIterator]();
    let first: string | undefined;
    while (!first) first = (await iterator.next()).value!.choices[0]?.delta.content ?? undefined;
    expect(first).toBe("a");
    expect(upstream.calls[0]!.wasAborted()).toBe(false);
    controller.abort();
    // The client's stream ends (the client reports it as done or as an abort error).
    await iterator.next().catch((error: unknown) => expect(error).toBeInstanceOf(OpenAI.APIUserAbortError));
    await upstream.calls[0]!.aborted; // the msw handler saw the abort
    expect(upstream.calls[0]!.wasAborted()).toBe(true);
  });
});

describe("errors forwarded from the model router (docs/interface.md 7.2)", () => {
  it("relays an upstream 429 with its body and status, without Retry-After", async () => {
    const body = { error: { message: "Slow down please", type: "rate_limit_error", code: "rate_limited" } };
    upstream.script("vendor-a", { kind: "error", status: 429, body, headers: { "retry-after": "17" } });
    const error = await client.chat.completions.create({ model: "remote-a", messages: userMessage("x") }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const apiError = error as APIError;
    expect(apiError.status).toBe(429);
    expect(apiError.error).toEqual(body.error);
    expect(apiError.headers?.get("retry-after")).toBeNull();
    expect(apiError.headers?.get("x-service-request-id")).toMatch(/^[0-9a-f-]{36}$/);

    const raw = await chat({ model: "remote-a", messages: userMessage("x") });
    expect(raw.status).toBe(429);
    expect(raw.body).toEqual(body);
    expect(raw.headers.get("retry-after")).toBeNull();
  });

  it("relays a {detail} body verbatim with the provider's status", async () => {
    upstream.script("vendor-a", { kind: "error", status: 503, body: { detail: "Model is overloaded" } });
    const raw = await chat({ model: "remote-a", messages: userMessage("x") });
    expect(raw.status).toBe(503);
    expect(raw.body).toEqual({ detail: "Model is overloaded" });
    expect(raw.headers.get("x-service-request-id")).toMatch(/^[0-9a-f-]{36}$/);

    const error = await client.chat.completions.create({ model: "remote-a", messages: userMessage("x") }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect((error as APIError).status).toBe(503);
  });

  it("relays an upstream 400 error object as it is", async () => {
    const body = {
      error: { message: "context too long", type: "invalid_request_error", param: "messages", code: "context_length_exceeded" },
    };
    upstream.script("vendor-a", { kind: "error", status: 400, body });
    const raw = await chat({ model: "remote-a", messages: userMessage("x") });
    expect(raw.status).toBe(400);
    expect(raw.body).toEqual(body);
  });

  it("answers 502 server_error when the provider is unreachable", async () => {
    const raw = await chat({ model: "remote-down", messages: userMessage("x") });
    expect(raw.status).toBe(502);
    expect(raw.body.error.type).toBe("server_error");
    expect(raw.headers.get("x-service-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const error = await client.chat.completions.create({ model: "remote-down", messages: userMessage("x") }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
  });

  it("answers 503 server_error when the model's upstream key is not configured", async () => {
    const raw = await chat({ model: "remote-nokey", messages: userMessage("x") });
    expect(raw.status).toBe(503);
    expect(raw.body.error).toMatchObject({ type: "server_error" });
    expect(raw.body.error.message).toMatch(/not configured/);
    // The unset variable is the operator's business: in the log line, not in the answer.
    expect(JSON.stringify(raw.body)).not.toContain("CHAT_TEST_UNSET_KEY_VARIABLE");
    expect(server.logs().find((line) => line.requestId === raw.headers.get("x-service-request-id"))).toMatchObject({
      status: 503,
      operatorNote: { unsetVariable: "CHAT_TEST_UNSET_KEY_VARIABLE" },
    });
    expect(upstream.calls).toHaveLength(0);
  });

  it("answers a timeout when the upstream hangs past the model's timeout", async () => {
    upstream.script("vendor-slow", { kind: "hang" });
    const started = Date.now();
    const raw = await chat({ model: "remote-slow", messages: userMessage("x") });
    // docs/interface.md 7.2 lists 502 and 503 for the Platform: a timeout is a 502 server_error, not 504.
    expect(raw.status).toBe(502);
    expect(raw.body.error.type).toBe("server_error");
    expect(raw.headers.get("x-service-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(raw.body.error.message).toMatch(/did not answer within 0.3s/);
    expect(Date.now() - started).toBeLessThan(5000);
    await upstream.calls[0]!.aborted;
  });

  it("times out a stream whose upstream goes silent between chunks", async () => {
    upstream.script("vendor-slow", { kind: "stream", words: ["a", " b"], hangAfter: 1 });
    const { response, frames } = await rawStream({ model: "remote-slow", messages: userMessage("x"), stream: true });
    expect(response.status).toBe(200);
    expect(frames).not.toContain("[DONE]");
    expect(JSON.parse(frames.at(-1)!).error.message).toMatch(/did not answer within/);
    await upstream.calls[0]!.aborted;
  });

  it("refuses a listed but non-public model, and an unknown one, with 403 listing usable ids", async () => {
    for (const model of ["internal-only", "no-such-model"]) {
      const error = await client.chat.completions.create({ model, messages: userMessage("x") }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
      const message = (error as APIError).message;
      const usable = Object.entries(models)
        .filter(([, entry]) => (entry as { public?: boolean }).public !== false)
        .map(([id]) => id);
      for (const id of usable) expect(message).toContain(id);
      expect(message).not.toMatch(/internal-only.*internal-only/);
      expect((error as APIError).headers?.get("x-service-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    }
  });
});

describe("errors raised before the router (docs/interface.md 7.2): no X-Service-Request-Id", () => {
  it("401 Missing or invalid API key without a bearer platform key", async () => {
    const gatewayUser = await registerUser(server);
    const gatewaySecret: string = (
      await server.request("/gateway/v1/auth/keys", {
        method: "POST",
        headers: bearer(gatewayUser.token),
        json: { name: "g", description: "" },
      })
    ).body.key;
    expect(gatewaySecret).toMatch(/^sk_/);
    const cases: Record<string, string>[] = [
      {},
      { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` },
      { authorization: account.key }, // no Bearer
      bearer(gatewaySecret), // a gateway key
      bearer(gatewayUser.token), // a session token
      bearer("acct_abcdefghijklmnopqrstuvwxyz012345"), // another surface's prefix
      bearer("sk-otherservice-abcdefghijklmnopqrstuvwx"),
    ];
    for (const headers of cases) {
      const res = await server.request("/api/v1/chat/completions", {
        method: "POST",
        headers,
        json: { model: "local-echo", messages: userMessage("x") },
      });
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.body).toEqual({ error: { message: "Missing or invalid API key", type: "authentication_error", code: "unauthorized" } });
      expect(res.headers.get("x-service-request-id")).toBeNull();
    }
    const error = await openaiClient(server, "/api/v1", "not-a-key")
      .models.list()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as APIError).message).toMatch(/Missing or invalid API key/);
  });

  it("401 Invalid or expired API key for an unknown or revoked platform key", async () => {
    const other = await platformAccount(server);
    const revoke = await server.request(`/api/api-keys/${other.keyId}`, { method: "DELETE", headers: { cookie: other.cookie.pair } });
    expect(revoke.status).toBe(200);
    const error = await openaiClient(server, "/api/v1", other.key)
      .chat.completions.create({ model: "local-echo", messages: userMessage("x") })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as APIError).error).toMatchObject({ message: "Invalid or expired API key", type: "authentication_error" });
    expect((error as APIError).headers?.get("x-service-request-id")).toBeNull();
  });

  it("402 Insufficient credits on every endpoint, before any model runs", async () => {
    const broke = await platformAccount(server, 0);
    const brokeClient = openaiClient(server, "/api/v1", broke.key);
    for (const call of [
      () => brokeClient.models.list(),
      () => brokeClient.chat.completions.create({ model: "remote-a", messages: userMessage("x") }),
      () => brokeClient.chat.completions.create({ model: "remote-a", messages: userMessage("x"), stream: true }),
    ]) {
      const error = (await call().catch((e: unknown) => e)) as APIError;
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect(error.status).toBe(402);
      expect(error.error).toMatchObject({ message: "Insufficient credits", type: "insufficient_quota" });
      expect(error.headers?.get("x-service-request-id")).toBeNull();
    }
    expect(upstream.calls).toHaveLength(0);
    // Zero or below: a negative balance is refused the same way.
    await server.composition.ports.repos.credits.charge(broke.workspaceId, 5);
    const res = await chat({ model: "local-echo", messages: userMessage("x") }, broke.key);
    expect(res.status).toBe(402);
  });

  it("403 permission_error for a key without chat:write", async () => {
    const { secret } = await createKey(
      { ...server.composition.ports, keys: server.composition.ports.repos.keys },
      { kind: "platform", owner: account.workspaceId, userId: account.user.user.id, name: "read only", scopes: [] },
    );
    const error = (await openaiClient(server, "/api/v1", secret)
      .chat.completions.create({ model: "local-echo", messages: userMessage("x") })
      .catch((e: unknown) => e)) as APIError;
    expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(error.error).toMatchObject({ type: "permission_error" });
    expect(error.headers?.get("x-service-request-id")).toBeNull();
  });

  it("400 when model or messages is missing, with the message saying both are required", async () => {
    for (const body of [{ messages: userMessage("x") }, { model: "local-echo" }, {}]) {
      const res = await chat(body);
      expect(res.status).toBe(400);
      expect(res.body.error.type).toBe("invalid_request_error");
      expect(res.body.error.message).toMatch(/Both model and messages are required/);
      expect(res.headers.get("x-service-request-id")).toBeNull();
    }
    const error = await client.chat.completions.create({ model: "local-echo" } as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it("400 for a wrong type in any field", async () => {
    const base = { model: "local-echo", messages: userMessage("x") };
    const bad: Record<string, unknown>[] = [
      { ...base, model: 5 },
      { ...base, model: "" },
      { ...base, messages: "hello" },
      { ...base, messages: [] },
      { ...base, messages: [{ role: 1, content: "x" }] },
      { ...base, messages: [{ role: "user", content: 7 }] },
      { ...base, messages: ["x"] },
      { ...base, stream: "yes" },
      { ...base, temperature: "hot" },
      { ...base, temperature: 5 },
      { ...base, top_p: "x" },
      { ...base, max_tokens: 1.5 },
      { ...base, max_tokens: "10" },
    ];
    for (const body of bad) {
      const res = await chat(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.type).toBe("invalid_request_error");
      expect(res.headers.get("x-service-request-id")).toBeNull();
    }
    const notJson = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: { ...bearer(account.key), "content-type": "application/json" },
      body: "{nope",
    });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.type).toBe("invalid_request_error");
  });
});

describe("chat not configured", () => {
  it("answers 503 server_error when no model is set up", async () => {
    const empty = await startTestServer({ MODELS_JSON: JSON.stringify({ models: {} }) });
    try {
      const acct = await platformAccount(empty);
      const res = await empty.request("/api/v1/chat/completions", {
        method: "POST",
        headers: bearer(acct.key),
        json: { model: "anything", messages: userMessage("x") },
      });
      expect(res.status).toBe(503);
      expect(res.body.error.type).toBe("server_error");
      expect(res.body.error.message).toMatch(/not configured/);
      const list = await openaiClient(empty, "/api/v1", acct.key).models.list();
      expect(list.data).toEqual([]);
    } finally {
      await empty.close();
    }
  });

  it("serves the built-in echo-1 when nothing is configured", async () => {
    const plain = await startTestServer();
    try {
      const acct = await platformAccount(plain);
      const c = openaiClient(plain, "/api/v1", acct.key);
      const ids = (await c.models.list()).data.map((entry) => entry.id);
      expect(ids).toHaveLength(1);
      const completion = await c.chat.completions.create({ model: ids[0]!, messages: userMessage("default model") });
      expect(completion.choices[0]!.message.content).toBe("default model");
      expect(completion.usage!.completion_tokens).toBe(countTokens("default model"));
    } finally {
      await plain.close();
    }
  });
});
