import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import OpenAI, { APIError } from "openai";
import { bearer, startTestServer, type TestServer } from "../../helpers/server.js";
import { withCookie } from "../../helpers/console.js";
import {
  consoleKey,
  loopbackFetch,
  openaiClient,
  platformAccount,
  sseData,
  userMessage,
  type PlatformAccount,
} from "../../helpers/chat.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";
import { createOpenAiUpstream, fakeUsage } from "../../../mocks/openai-upstream.js";
import { countPromptTokens, countTokens } from "../../../rpc/chat/tokens.js";

/** Per-key limits, credits and metering on the Platform API (docs/interface.md 2.4, 7.2, 8; docs/architecture.md "Identity and money"). */

const UPSTREAM = "http://metered.upstream.test/v1";
const upstream = createOpenAiUpstream(UPSTREAM);
const msw = mockUpstreams(...upstream.handlers);

// Prices are micro-credits per 1,000 tokens (docs/models-and-chat.md).
const PRICE = { input: 3000, output: 7000 };
const MODELS = () => ({
  models: {
    // streamUsage: the Platform's streams are billed on the upstream's count (docs/providers.md "Fields").
    metered: {
      provider: "openai-compatible",
      baseURL: msw.url(UPSTREAM),
      upstreamModel: "vendor-metered",
      price: PRICE,
      streamUsage: true,
    },
    "echo-cheap": { provider: "echo" },
    "echo-dear": { provider: "echo", price: { input: 100_000, output: 100_000 } },
  },
});
const costOf = (usage: { prompt_tokens: number; completion_tokens: number }, price = PRICE) =>
  Math.ceil((usage.prompt_tokens * price.input + usage.completion_tokens * price.output) / 1000);

let server: TestServer;
let account: PlatformAccount;

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({ MODELS_JSON: JSON.stringify(MODELS()) });
  account = await platformAccount(server);
});
afterEach(() => upstream.reset());
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
  await msw.close();
});

const balance = () => server.composition.ports.repos.credits.balance(account.workspaceId);
const listKeys = async () =>
  (await server.request("/api/api-keys", { headers: withCookie(account.cookie) })).body.data as Record<string, any>[];

describe("rpmLimit and tpmLimit (per key, per minute)", () => {
  it("refuses requests past rpmLimit with 429 and no Retry-After (docs/interface.md 7.2)", async () => {
    const { key } = await consoleKey(server, account, { rpmLimit: 2 });
    const client = openaiClient(server, "/api/v1", key);
    for (let i = 0; i < 2; i++) await client.chat.completions.create({ model: "echo-cheap", messages: userMessage("hi") });
    const error = (await client.chat.completions
      .create({ model: "echo-cheap", messages: userMessage("hi") })
      .catch((e: unknown) => e)) as APIError;
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(error.message).toMatch(/2 requests per minute/);
    // docs/interface.md 7.2: "no Retry-After header is sent, so clients apply their own backoff".
    expect(error.headers?.get("retry-after")).toBeNull();
    const raw = await fetch(server.url("/api/v1/chat/completions"), {
      method: "POST",
      headers: { ...bearer(key), "content-type": "application/json" },
      body: JSON.stringify({ model: "echo-cheap", messages: userMessage("hi") }),
    });
    expect(raw.status).toBe(429);
    expect(raw.headers.get("retry-after")).toBeNull();
    expect(((await raw.json()) as { error: { type: string } }).error.type).toBe("rate_limit_error");
    expect(error.headers?.get("x-service-request-id")).toBeNull();
    // Other keys of the workspace are not affected.
    await openaiClient(server, "/api/v1", account.key).chat.completions.create({ model: "echo-cheap", messages: userMessage("hi") });
  });

  it("refuses requests past tpmLimit with 429 and no Retry-After, counting metered tokens", async () => {
    const messages = userMessage("x");
    const prompt = countPromptTokens(messages);
    // Room for one request (prompt + 1 metered); then nothing of the minute remains.
    const { key } = await consoleKey(server, account, { tpmLimit: prompt + 1 });
    const client = openaiClient(server, "/api/v1", key);
    const first = await client.chat.completions.create({ model: "echo-cheap", messages, max_tokens: 1 });
    expect(first.usage!.total_tokens).toBe(prompt + 1);
    const error = (await client.chat.completions
      .create({ model: "echo-cheap", messages, max_tokens: 1 })
      .catch((e: unknown) => e)) as APIError;
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(error.message).toMatch(/tokens per minute/);
    expect(error.headers?.get("retry-after")).toBeNull();

    // A worst case larger than the whole limit is still served while the prompt fits in what
    // remains of the minute (held capped at what remains); then the minute is used up.
    const { key: tiny } = await consoleKey(server, account, { tpmLimit: prompt });
    const served = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(tiny),
      json: { model: "echo-cheap", messages, max_tokens: 1 },
    });
    expect(served.status).toBe(200);
    const res = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(tiny),
      json: { model: "echo-cheap", messages, max_tokens: 1 },
    });
    expect(res.status).toBe(429);
    expect(res.body.error).toMatchObject({
      type: "rate_limit_error",
      message: `Rate limit reached for this API key: ${prompt} tokens per minute`,
    });
    expect(res.headers.get("retry-after")).toBeNull();

    // A prompt larger than what the minute allows is refused before any model runs.
    const { key: small } = await consoleKey(server, account, { tpmLimit: prompt - 1 });
    const big = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(small),
      json: { model: "echo-cheap", messages, max_tokens: 1 },
    });
    expect(big.status).toBe(429);
    expect(big.body.error).toMatchObject({
      type: "rate_limit_error",
      message: `This request's prompt of ${prompt} tokens is larger than this API key's limit of ${prompt - 1} tokens per minute`,
    });
    expect(big.headers.get("x-service-request-id")).toBeNull();
  });

  it("serves the first request of a key with tpmLimit 1000 though its worst case holds 4,096 output tokens", async () => {
    const { key } = await consoleKey(server, account, { tpmLimit: 1000 });
    const client = openaiClient(server, "/api/v1", key);
    const answer = await client.chat.completions.create({ model: "echo-cheap", messages: userMessage("hello") });
    expect(answer.choices[0]!.message.content).toBe("hello");
    // …and the next ones while the minute's tokens last.
    await client.chat.completions.create({ model: "echo-cheap", messages: userMessage("hello") });
    const listed = (await listKeys()).find((entry) => entry.tpmLimit === 1000);
    expect(listed).toBeDefined();
  });

  it("a removed limit (null) stops applying", async () => {
    const limited = await consoleKey(server, account, { rpmLimit: 1 });
    const client = openaiClient(server, "/api/v1", limited.key);
    await client.chat.completions.create({ model: "echo-cheap", messages: userMessage("hi") });
    await expect(client.chat.completions.create({ model: "echo-cheap", messages: userMessage("hi") })).rejects.toBeInstanceOf(
      OpenAI.RateLimitError,
    );
    const patched = await server.request(`/api/api-keys/${limited.id}`, {
      method: "PATCH",
      headers: withCookie(account.cookie),
      json: { rpmLimit: null },
    });
    expect(patched.status).toBe(200);
    await client.chat.completions.create({ model: "echo-cheap", messages: userMessage("hi") });
  });
});

describe("spendLimit, expiresAt, lastUsedAt", () => {
  it("refuses a key once its spendLimit (credits) cannot cover a request's most", async () => {
    const messages = userMessage("x");
    // max_tokens 1: the hold is exactly what the echo model then costs.
    const perRequest = costOf({ prompt_tokens: countPromptTokens(messages), completion_tokens: 1 }, { input: 100_000, output: 100_000 });
    // Two requests fit under the limit, the third is refused.
    const { key } = await consoleKey(server, account, { spendLimit: (perRequest * 2) / 1_000_000 });
    const client = openaiClient(server, "/api/v1", key);
    const before = await balance();
    await client.chat.completions.create({ model: "echo-dear", messages, max_tokens: 1 });
    await client.chat.completions.create({ model: "echo-dear", messages, max_tokens: 1 });
    const error = (await client.chat.completions
      .create({ model: "echo-dear", messages, max_tokens: 1 })
      .catch((e: unknown) => e)) as APIError;
    expect(error.status).toBe(402);
    expect(error.error).toMatchObject({ type: "insufficient_quota" });
    expect(error.message).toMatch(/spend limit/);
    expect(before - (await balance())).toBe(2 * perRequest);
  });

  it("refuses a key after its expiresAt with 401 Invalid or expired API key", async () => {
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const { key } = await consoleKey(server, account, {}, { expiresAt });
    const listed = (await listKeys()).find((entry) => entry.expiresAt === expiresAt);
    expect(listed).toBeDefined();
    const client = openaiClient(server, "/api/v1", key);
    await client.chat.completions.create({ model: "echo-cheap", messages: userMessage("hi") });
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 2 * 3_600_000 });
    try {
      const error = (await client.chat.completions
        .create({ model: "echo-cheap", messages: userMessage("hi") })
        .catch((e: unknown) => e)) as APIError;
      expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
      expect(error.error).toMatchObject({ message: "Invalid or expired API key", type: "authentication_error" });
    } finally {
      vi.useRealTimers();
    }
  });

  it("records lastUsedAt when a key is used", async () => {
    const { key, id } = await consoleKey(server, account);
    expect((await listKeys()).find((entry) => entry.id === id)!.lastUsedAt).toBeNull();
    const before = Date.now();
    await openaiClient(server, "/api/v1", key).models.list();
    const lastUsedAt = Date.parse((await listKeys()).find((entry) => entry.id === id)!.lastUsedAt);
    expect(lastUsedAt).toBeGreaterThanOrEqual(before - 1000);
    expect(lastUsedAt).toBeLessThanOrEqual(Date.now());
  });
});

describe("credits: metered usage at the model's price", () => {
  const words = ["one", " two", " three", " four"];
  const cost = costOf(fakeUsage(words));

  it("debits a non-streamed request from the upstream's usage", async () => {
    upstream.script("vendor-metered", { kind: "reply", words });
    const before = await balance();
    const completion = await openaiClient(server, "/api/v1", account.key).chat.completions.create({
      model: "metered",
      messages: userMessage("q"),
    });
    expect(completion.usage).toEqual(fakeUsage(words));
    expect(before - (await balance())).toBe(cost);
  });

  it("debits a streamed request once, from the usage it always asks upstream for, and strips it for the client", async () => {
    upstream.script("vendor-metered", { kind: "stream", words });
    const before = await balance();
    const stream = await openaiClient(server, "/api/v1", account.key).chat.completions.create({
      model: "metered",
      messages: userMessage("q"),
      stream: true,
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe(words.join(""));
    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
    expect(upstream.calls[0]!.body.stream_options).toEqual({ include_usage: true });
    expect(before - (await balance())).toBe(cost);
  });

  it("drops stream_options on the Platform (no usage chunk for a client that asked), and still debits once", async () => {
    upstream.script("vendor-metered", { kind: "stream", words });
    const before = await balance();
    const stream = await openaiClient(server, "/api/v1", account.key).chat.completions.create({
      model: "metered",
      messages: userMessage("q"),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
    expect(upstream.calls[0]!.body.stream_options).toEqual({ include_usage: true });
    expect(before - (await balance())).toBe(cost);
  });

  it("ends the client's stream when the upstream drops mid-stream, and bills what was streamed", async () => {
    upstream.script("vendor-metered", { kind: "stream", words, dropAfter: 2 });
    const messages = userMessage("q");
    const before = await balance();
    const response = await loopbackFetch(server.url("/api/v1/chat/completions"), {
      method: "POST",
      headers: { ...bearer(account.key), "content-type": "application/json" },
      body: JSON.stringify({ model: "metered", messages, stream: true }),
    });
    const frames = sseData(await response.text());
    expect(frames).not.toContain("[DONE]");
    const parsed = frames.map((frame) => JSON.parse(frame));
    expect(parsed.flatMap((chunk) => chunk.choices?.map((choice: any) => choice.delta.content ?? "") ?? []).join("")).toBe("one two");
    expect(parsed.at(-1).error).toMatchObject({ type: "server_error" });
    const streamedCost = costOf({ prompt_tokens: countPromptTokens(messages), completion_tokens: countTokens("one two") });
    expect(before - (await balance())).toBe(streamedCost);

    // The official client reports the cut as an error.
    upstream.script("vendor-metered", { kind: "stream", words, dropAfter: 2 });
    const stream = await openaiClient(server, "/api/v1", account.key).chat.completions.create({ model: "metered", messages, stream: true });
    await expect(
      (async () => {
        for await (const _chunk of stream) {
          // drain
        }
      })(),
    ).rejects.toBeInstanceOf(APIError);
  });

  it("bills what was streamed when the client disconnects", async () => {
    upstream.script("vendor-metered", { kind: "stream", words, hangAfter: 2 });
    const messages = userMessage("q");
    const before = await balance();
    const controller = new AbortController();
    const stream = await openaiClient(server, "/api/v1", account.key).chat.completions.create(
      { model: "metered", messages, stream: true },
      { signal: controller.signal },
    );
    const iterator = stream[Symbol.asyncIterator]();
    let text = "";
    while (text !== "one two") text += (await iterator.next()).value!.choices[0]?.delta.content ?? "";
    controller.abort();
    await upstream.calls[0]!.aborted;
    const expected = costOf({ prompt_tokens: countPromptTokens(messages), completion_tokens: countTokens("one two") });
    await vi.waitFor(async () => expect(before - (await balance())).toBe(expected));
  });

  it("serves a request whose worst case passes the balance while the balance is above zero, then 402, never below −(one request's worst case)", async () => {
    const poor = await platformAccount(server, 0);
    const messages = userMessage("spend it");
    const prompt = countPromptTokens(messages);
    const price = { input: 1000, output: 2000 };
    const fits = costOf({ prompt_tokens: prompt, completion_tokens: 2 }, price);
    await server.composition.ports.repos.credits.grant(poor.workspaceId, fits);
    const client = openaiClient(server, "/api/v1", poor.key);
    // max_tokens 3 costs more than the balance: held capped at the balance, served, charged in full.
    const served = await client.chat.completions.create({ model: "echo-cheap", messages, max_tokens: 3 });
    expect(served.usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: 2 });
    expect(await server.composition.ports.repos.credits.balance(poor.workspaceId)).toBe(0);
    // A balance that covers part of the next request: held capped, charged in full, so the
    // balance ends below zero by that request's excess over its hold and no more.
    await server.composition.ports.repos.credits.grant(poor.workspaceId, fits);
    const longer = userMessage("spend it now");
    const worst = costOf({ prompt_tokens: countPromptTokens(longer), completion_tokens: 3 }, price);
    await client.chat.completions.create({ model: "echo-cheap", messages: longer, max_tokens: 3 });
    const balance = await server.composition.ports.repos.credits.balance(poor.workspaceId);
    expect(balance).toBe(fits - worst);
    expect(balance).toBeLessThan(0);
    expect(balance).toBeGreaterThanOrEqual(-worst);
    // docs/interface.md 7.2: a balance of zero or below is 402 before any model runs.
    const again = (await client.chat.completions
      .create({ model: "echo-cheap", messages: userMessage("again"), max_tokens: 1 })
      .catch((e: unknown) => e)) as APIError;
    expect(again.status).toBe(402);
    expect(again.error).toMatchObject({ message: "Insufficient credits", type: "insufficient_quota" });
    expect(again.headers?.get("x-service-request-id")).toBeNull();
  });

  it("100 micro-credits and a model costing 10 a request: served ten times though each request's worst case (4,096 output tokens) is far more", async () => {
    const poor = await platformAccount(server, 0);
    const messages = userMessage("x");
    // echo-cheap at 1,000/2,000 micro-credits per 1,000 tokens: 8 prompt tokens and 1 answer token cost 10.
    expect(costOf({ prompt_tokens: countPromptTokens(messages), completion_tokens: 1 }, { input: 1000, output: 2000 })).toBe(10);
    await server.composition.ports.repos.credits.grant(poor.workspaceId, 100);
    const client = openaiClient(server, "/api/v1", poor.key);
    for (let i = 0; i < 10; i++) await client.chat.completions.create({ model: "echo-cheap", messages });
    expect(await server.composition.ports.repos.credits.balance(poor.workspaceId)).toBe(0);
    await expect(client.chat.completions.create({ model: "echo-cheap", messages })).rejects.toMatchObject({
      status: 402,
      error: { message: "Insufficient credits" },
    });
  });
});

describe("limits shared by two instances on one Redis", () => {
  const prefix = uniqueRedisPrefix();
  let a: TestServer;
  let b: TestServer;

  beforeAll(async () => {
    const env = { STORAGE: "redis", REDIS_PREFIX: prefix, MODELS_JSON: JSON.stringify(MODELS()) };
    [a, b] = await Promise.all([startTestServer(env), startTestServer(env)]);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await dropRedisPrefix(prefix);
  });

  it("admits exactly rpmLimit requests across both instances and debits each once", async () => {
    const shared = await platformAccount(a);
    const limit = 5;
    const { key } = await consoleKey(a, shared, { rpmLimit: limit });
    const before = await b.composition.ports.repos.credits.balance(shared.workspaceId);
    const messages = userMessage("shared limit");
    const results = await Promise.all(
      Array.from({ length: 14 }, (_, i) =>
        (i % 2 ? a : b).request("/api/v1/chat/completions", {
          method: "POST",
          headers: bearer(key),
          json: { model: "echo-cheap", messages },
        }),
      ),
    );
    const statuses = results.map((res) => res.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(limit);
    expect(statuses.filter((status) => status === 429)).toHaveLength(14 - limit);
    for (const res of results.filter((r) => r.status === 429)) expect(res.headers.get("retry-after")).toBeNull();
    const perRequest = costOf(results.find((res) => res.status === 200)!.body.usage, { input: 1000, output: 2000 });
    expect(before - (await a.composition.ports.repos.credits.balance(shared.workspaceId))).toBe(limit * perRequest);
  });
});
