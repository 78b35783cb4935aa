import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type OpenAI from "openai";
import { APIError } from "openai";
import { http, HttpResponse } from "msw";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { loopbackFetch, openaiClient, platformAccount, sseData, userMessage, type PlatformAccount } from "../../helpers/chat.js";
import { createOpenAiUpstream } from "../../../mocks/openai-upstream.js";
import { serveMockUpstreams, type MockUpstreams } from "../../helpers/mock-upstreams.js";
import { countPromptTokens, countTokens } from "../../../rpc/chat/tokens.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * Deployments, retries, fallbacks and cooldowns (docs/providers.md) over real HTTP with the
 * official client, against OpenAI-compatible upstreams mocked on loopback. Each deployment
 * asks the mock for its own upstream model name, so the calls show which one answered.
 */

const UPSTREAM = "http://models.upstream.test/v1";
const upstream = createOpenAiUpstream(UPSTREAM);
let msw: MockUpstreams;
let server: TestServer;

const CHEAP = { input: 1000, output: 2000 };
const DEAR = { input: 5000, output: 9000 };
const FALLBACK = { input: 3000, output: 4000 };

const callsTo = (name: string) => upstream.calls.filter((call) => call.body.model === name).length;
// streamUsage: Platform streams are billed on the upstream's count here too (docs/providers.md "Fields").
const deployment = (upstreamModel: string, extra: Record<string, unknown> = {}) => ({
  provider: "openai-compatible",
  baseURL: msw.url(UPSTREAM),
  upstreamModel,
  streamUsage: true,
  ...extra,
});
const priced = (price: { input: number; output: number }, prompt: number, completion: number) =>
  Math.ceil((prompt * price.input + completion * price.output) / 1000);

beforeAll(async () => {
  msw = await serveMockUpstreams(...upstream.handlers);
  const models = {
    // 429 with Retry-After on the first, answered by the second.
    pair: {
      deployments: [deployment("pair-a", { price: CHEAP, weight: 1 }), deployment("pair-b", { price: DEAR, weight: 0 })],
      retries: 1,
    },
    // The dear one fails and the cheap one answers: held at the dear price, settled at the cheap one.
    spill: {
      deployments: [deployment("spill-a", { price: DEAR, weight: 1 }), deployment("spill-b", { price: CHEAP, weight: 0 })],
      retries: 1,
    },
    weighted: { deployments: [deployment("w-a", { weight: 3 }), deployment("w-b", { weight: 1 })], routing: "weighted" },
    // Fails, then falls back.
    primary: { ...deployment("primary-up"), price: CHEAP, fallbacks: ["secondary"] },
    secondary: { ...deployment("secondary-up"), price: FALLBACK },
    // Too long for its window: goes straight to the fallback with a larger one.
    small: { ...deployment("small-up"), contextWindow: 1000, retries: 3, fallbacks: ["same-window", "large"] },
    "same-window": { ...deployment("same-window-up"), contextWindow: 1000 },
    large: { ...deployment("large-up"), contextWindow: 100000, price: DEAR },
    cut: { deployments: [deployment("cut-a", { price: DEAR, weight: 1 }), deployment("cut-b", { weight: 0 })], retries: 1 },
    // A request's own fault is never retried.
    strict: { deployments: [deployment("strict-a", { weight: 1 }), deployment("strict-b", { weight: 0 })], retries: 3 },
    capped: { deployments: [deployment("capped-a", { weight: 1, rpm: 2 }), deployment("capped-b", { weight: 0 })] },
    slow: { deployments: [deployment("slow-a", { weight: 1, timeoutSeconds: 0.3 }), deployment("slow-b", { weight: 0 })] },
    // The smart example of docs/providers.md, with echo and an upstream.
    smart: {
      deployments: [{ provider: "echo", weight: 3, price: CHEAP }, deployment("smart-up", { weight: 1, price: DEAR })],
      routing: "least-busy",
      fallbacks: ["secondary"],
      cooldownSeconds: 30,
    },
  };
  server = await startTestServer({ MODELS_JSON: JSON.stringify({ models }) });
});
afterEach(() => upstream.reset());
afterAll(async () => {
  await server.close();
  await msw.close();
});

const balance = (account: PlatformAccount) => server.composition.ports.repos.credits.balance(account.workspaceId);

describe("retries across deployments", () => {
  it("a 429 with Retry-After on one deployment is answered by another, settled at the answering deployment's price", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    upstream.script("pair-a", {
      kind: "error",
      status: 429,
      body: { error: { message: "slow down", type: "rate_limit_error" } },
      headers: { "retry-after": "30" },
    });
    upstream.script("pair-b", { kind: "reply", words: ["from", " b"] });
    const before = await balance(account);
    const started = Date.now();
    const answer = await client.chat.completions.create({ model: "pair", messages: userMessage("hello there"), max_tokens: 20 });
    expect(answer.choices[0]!.message.content).toBe("from b");
    expect(answer.model).toBe("pair");
    // Another deployment is tried at once: the first one's Retry-After is for the first one.
    expect(Date.now() - started).toBeLessThan(5000);
    expect(callsTo("pair-a")).toBe(1);
    expect(callsTo("pair-b")).toBe(1);
    expect(before - (await balance(account))).toBe(priced(DEAR, 10, 2));
  });

  it("when every attempt fails the client gets the last upstream error verbatim with X-Service-Request-Id, and nothing is charged", async () => {
    const account = await platformAccount(server, 1);
    upstream.script("pair-a", { kind: "error", status: 503, body: { error: { message: "a is down", type: "server_error" } } });
    upstream.script("pair-b", { kind: "error", status: 500, body: { detail: "b broke too" } });
    const before = await balance(account);
    const res = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(account.key),
      json: { model: "pair", messages: userMessage("hi") },
    });
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ detail: "b broke too" });
    expect(res.headers.get("x-service-request-id")).toMatch(/.+/);
    expect(callsTo("pair-a") + callsTo("pair-b")).toBe(2);
    expect(await balance(account)).toBe(before);
  });

  it("a 4xx that is the request's fault is relayed at once, never retried", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    for (const status of [400, 401, 403, 404, 413, 422]) {
      upstream.reset();
      upstream.script("strict-a", {
        kind: "error",
        status,
        body: { error: { message: `refused ${status}`, type: "invalid_request_error" } },
      });
      const error = await client.chat.completions.create({ model: "strict", messages: userMessage("hi") }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).status).toBe(status);
      expect(callsTo("strict-a")).toBe(1);
      expect(callsTo("strict-b")).toBe(0);
    }
  });
});

describe("a deployment's own capacity and timeout", () => {
  it("a deployment at its rpm is skipped for the minute", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    for (let i = 0; i < 3; i++) await client.chat.completions.create({ model: "capped", messages: userMessage("count me") });
    expect(callsTo("capped-a")).toBe(2);
    expect(callsTo("capped-b")).toBe(1);
  });

  it("a deployment that does not answer within its timeoutSeconds is retried on another", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    upstream.script("slow-a", { kind: "hang" });
    const answer = await client.chat.completions.create({ model: "slow", messages: userMessage("are you there") });
    expect(answer.choices[0]!.message.content).toBe("are you there");
    expect(callsTo("slow-a")).toBe(1);
    expect(callsTo("slow-b")).toBe(1);
    await upstream.calls.find((call) => call.body.model === "slow-a")!.aborted;
  });
});

describe("weighted routing", () => {
  it("weights 3:1 over 400 requests send 75 % ± 7 % to the first", async () => {
    const account = await platformAccount(server, 100);
    const client = openaiClient(server, "/api/v1", account.key);
    let next = 0;
    const worker = async () => {
      while (next < 400) {
        next++;
        await client.chat.completions.create({ model: "weighted", messages: userMessage("w"), max_tokens: 5 });
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const a = callsTo("w-a");
    const b = callsTo("w-b");
    expect(a + b).toBe(400);
    expect(a / 400).toBeGreaterThanOrEqual(0.68);
    expect(a / 400).toBeLessThanOrEqual(0.82);
    // 400 requests over HTTP: well within a minute alone, more on a shared, busy machine.
  }, 120_000);
});

describe("fallbacks", () => {
  it("a failing model falls back, and the request is settled at the fallback's price", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    upstream.script("primary-up", { kind: "error", status: 502, body: { error: { message: "bad gateway upstream" } } });
    upstream.script("secondary-up", { kind: "reply", words: ["fell", " back", " here"] });
    const before = await balance(account);
    const answer = await client.chat.completions.create({ model: "primary", messages: userMessage("anyone?") });
    expect(answer.choices[0]!.message.content).toBe("fell back here");
    expect(answer.model).toBe("primary");
    expect(callsTo("primary-up")).toBe(1);
    expect(callsTo("secondary-up")).toBe(1);
    expect(before - (await balance(account))).toBe(priced(FALLBACK, 10, 3));
  });

  it("streams fall back too, before anything reached the client", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    upstream.script("primary-up", { kind: "error", status: 529, body: { error: { message: "overloaded" } } });
    upstream.script("secondary-up", { kind: "stream", words: ["streamed", " fallback"] });
    const before = await balance(account);
    // The Platform API drops stream_options (docs/models-and-chat.md): no usage chunk reaches
    // the client, but the stream is metered from the upstream's usage all the same.
    const stream = await client.chat.completions.create({
      model: "primary",
      messages: userMessage("go"),
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: OpenAI.Completions.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      usage = chunk.usage ?? usage;
      expect(chunk.model).toBe("primary");
    }
    expect(text).toBe("streamed fallback");
    expect(usage).toBeUndefined();
    await eventually(async () => before - (await balance(account)) === priced(FALLBACK, 10, 2));
  });

  it("a context-window error goes straight to a fallback with a larger window", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    upstream.script("small-up", {
      kind: "error",
      status: 400,
      body: {
        error: {
          message: "This model's maximum context length is 1000 tokens",
          type: "invalid_request_error",
          code: "context_length_exceeded",
        },
      },
    });
    upstream.script("large-up", { kind: "reply", words: ["roomy"] });
    const answer = await client.chat.completions.create({ model: "small", messages: userMessage("a long prompt") });
    expect(answer.choices[0]!.message.content).toBe("roomy");
    // Not retried on its own deployment, and the fallback with the same window is skipped.
    expect(callsTo("small-up")).toBe(1);
    expect(callsTo("same-window-up")).toBe(0);
    expect(callsTo("large-up")).toBe(1);
  });

  it("one hold covers the dearest candidate, capped at what remains: a balance above zero is served and settles at the answering deployment's price; zero is 402", async () => {
    const messages = userMessage("price check");
    const prompt = countPromptTokens(messages);
    const dearest = priced(FALLBACK, prompt, 50);
    expect(dearest).toBeGreaterThan(priced(CHEAP, prompt, 50));
    // docs/billing.md "Admission": served while the balance is above zero, even below the worst case.
    const short = await platformAccount(server, 0);
    await server.composition.ports.repos.credits.grant(short.workspaceId, dearest - 1);
    upstream.script("primary-up", { kind: "reply", words: ["ok"] });
    const served = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(short.key),
      json: { model: "primary", messages, max_tokens: 50 },
    });
    expect(served.status).toBe(200);
    // Settled at the price of the deployment that answered, the rest of the hold released.
    await eventually(
      async () => (await server.composition.ports.repos.credits.balance(short.workspaceId)) === dearest - 1 - priced(CHEAP, 10, 1),
    );
    const empty = await platformAccount(server, 0);
    const calls = callsTo("primary-up");
    const refused = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(empty.key),
      json: { model: "primary", messages, max_tokens: 50 },
    });
    expect(refused.status).toBe(402);
    expect(callsTo("primary-up")).toBe(calls);
  });
});

describe("streams", () => {
  it("a stream cut after the first byte is not retried: it ends with an error frame and no [DONE], billed for what was streamed", async () => {
    const account = await platformAccount(server, 1);
    upstream.script("cut-a", { kind: "stream", words: ["one", " two", " three"], dropAfter: 2 });
    const messages = userMessage("cut me");
    const before = await balance(account);
    const response = await loopbackFetch(server.url("/api/v1/chat/completions"), {
      method: "POST",
      headers: { ...bearer(account.key), "content-type": "application/json" },
      body: JSON.stringify({ model: "cut", messages, stream: true }),
    });
    expect(response.status).toBe(200);
    const frames = sseData(await response.text());
    expect(frames.at(-1)).not.toBe("[DONE]");
    expect(JSON.parse(frames.at(-1)!)).toHaveProperty("error");
    const text = frames
      .slice(0, -1)
      .map((frame) => JSON.parse(frame).choices?.[0]?.delta?.content ?? "")
      .join("");
    expect(text).toBe("one two");
    expect(callsTo("cut-a")).toBe(1);
    expect(callsTo("cut-b")).toBe(0);
    await eventually(async () => before - (await balance(account)) === priced(DEAR, countPromptTokens(messages), countTokens("one two")));
  });

  it("a stream that fails before its first chunk is retried on another deployment", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    upstream.script("cut-a", { kind: "stream", words: ["never"], dropAfter: 0 });
    msw.use(
      // The first deployment's connection closes with its headers sent and no frame.
      http.post(`${UPSTREAM}/chat/completions`, async ({ request }) => {
        const body = (await request.clone().json()) as { model: string };
        if (body.model !== "cut-a") return undefined;
        upstream.calls.push({
          url: new URL(request.url),
          body,
          headers: request.headers,
          aborted: Promise.resolve(),
          wasAborted: () => false,
        });
        return new HttpResponse(new ReadableStream({ start: (controller) => controller.close() }), {
          headers: { "content-type": "text/event-stream" },
        });
      }),
    );
    try {
      upstream.script("cut-b", { kind: "stream", words: ["second", " try"] });
      const stream = await client.chat.completions.create({ model: "cut", messages: userMessage("x"), stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
      expect(text).toBe("second try");
      expect(callsTo("cut-a")).toBe(1);
      expect(callsTo("cut-b")).toBe(1);
    } finally {
      msw.resetHandlers();
    }
  });
});

describe("one hold, settled once and exactly, on every path", () => {
  const ledgerState = (account: PlatformAccount) =>
    server.composition.ports.repos.ledger.state(server.composition.ports.repos.ledger.credits(account.workspaceId));

  /**
   * Streams `model` with max_tokens 40 while the answering upstream is held open after its
   * first words: what is held then, and the text the client got in the end.
   */
  async function heldWhileStreaming(
    account: PlatformAccount,
    model: string,
    messages: ReturnType<typeof userMessage>,
    release: () => void,
  ) {
    const before = await ledgerState(account);
    const response = await loopbackFetch(server.url("/api/v1/chat/completions"), {
      method: "POST",
      headers: { ...bearer(account.key), "content-type": "application/json" },
      body: JSON.stringify({ model, messages, max_tokens: 40, stream: true }),
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value, { stream: true });
    const inFlight = await ledgerState(account);
    expect(inFlight.value).toBe(before.value);
    release();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    await vi.waitFor(async () => expect((await ledgerState(account)).held).toBe(0));
    const after = await ledgerState(account);
    return { held: inFlight.held, charged: before.value - after.value, frames: sseData(text) };
  }

  const content = (frames: string[]) =>
    frames
      .filter((frame) => frame !== "[DONE]")
      .map((frame) => JSON.parse(frame).choices?.[0]?.delta?.content ?? "")
      .join("");
  const gate = () => {
    let release!: () => void;
    const promise = new Promise<void>((resolve) => (release = resolve));
    return { promise, release };
  };

  it("retry: held at the dearest deployment, settled once at the price of the one that answered", async () => {
    const account = await platformAccount(server, 1);
    const messages = userMessage("hold me through a retry");
    const open = gate();
    upstream.script("spill-a", {
      kind: "error",
      status: 429,
      body: { error: { message: "slow down", type: "rate_limit_error" } },
      headers: { "retry-after": "2" },
    });
    upstream.script("spill-b", { kind: "stream", words: ["cheap", " answer", " here"], holdBeforeEnd: open.promise });
    const { held, charged, frames } = await heldWhileStreaming(account, "spill", messages, open.release);
    expect(held).toBe(priced(DEAR, countPromptTokens(messages), 40));
    expect(content(frames)).toBe("cheap answer here");
    expect(frames.at(-1)).toBe("[DONE]");
    expect(charged).toBe(priced(CHEAP, 10, 3));
    expect([callsTo("spill-a"), callsTo("spill-b")]).toEqual([1, 1]);
  });

  it("fallback: held at the dearest candidate across the model and its fallbacks, settled once at the fallback's price", async () => {
    const account = await platformAccount(server, 1);
    const messages = userMessage("hold me through a fallback");
    const open = gate();
    upstream.script("primary-up", { kind: "error", status: 503, body: { error: { message: "primary down" } } });
    upstream.script("secondary-up", { kind: "stream", words: ["fallback", " answer"], holdBeforeEnd: open.promise });
    const { held, charged, frames } = await heldWhileStreaming(account, "primary", messages, open.release);
    expect(held).toBe(Math.max(priced(CHEAP, countPromptTokens(messages), 40), priced(FALLBACK, countPromptTokens(messages), 40)));
    expect(content(frames)).toBe("fallback answer");
    expect(charged).toBe(priced(FALLBACK, 10, 2));
    expect([callsTo("primary-up"), callsTo("secondary-up")]).toEqual([1, 1]);
  });

  it("cut stream: held at the dearest deployment, not retried, settled once for what was streamed at the price of the one that streamed", async () => {
    const account = await platformAccount(server, 1);
    const messages = userMessage("hold me, then cut me");
    const open = gate();
    upstream.script("cut-a", { kind: "stream", words: ["one", " two", " three"], dropAfter: 2, holdBeforeEnd: open.promise });
    const { held, charged, frames } = await heldWhileStreaming(account, "cut", messages, open.release);
    expect(held).toBe(priced(DEAR, countPromptTokens(messages), 40));
    expect(frames.at(-1)).not.toBe("[DONE]");
    expect(JSON.parse(frames.at(-1)!)).toHaveProperty("error");
    expect(content(frames.slice(0, -1))).toBe("one two");
    expect(charged).toBe(priced(DEAR, countPromptTokens(messages), countTokens("one two")));
    expect([callsTo("cut-a"), callsTo("cut-b")]).toEqual([1, 0]);
  });
});

describe("the documented example shape", () => {
  it("serves a model with echo and upstream deployments, least-busy", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => client.chat.completions.create({ model: "smart", messages: userMessage("same answer") })),
    );
    for (const answer of answers) expect(answer.choices[0]!.message.content).toBe("same answer");
    expect(callsTo("smart-up")).toBeGreaterThan(0);
    expect(callsTo("smart-up")).toBeLessThan(6);
  });
});

describe("cooldown shared by two instances on one Redis", () => {
  it("a deployment that keeps failing is skipped on both instances, and their health and /metrics show it", async () => {
    const prefix = uniqueRedisPrefix();
    const models = {
      cool: { deployments: [deployment("cool-a", { weight: 1 }), deployment("cool-b", { weight: 0 })], retries: 1, cooldownSeconds: 30 },
    };
    const env = { STORAGE: "redis", REDIS_PREFIX: prefix, MODELS_JSON: JSON.stringify({ models }) };
    const one = await startTestServer(env);
    const two = await startTestServer(env);
    try {
      upstream.script("cool-a", { kind: "error", status: 500, body: { error: { message: "a keeps failing" } } });
      upstream.script("cool-b", { kind: "reply", words: ["b", " answers"] });
      const accountOne = await platformAccount(one, 1);
      const accountTwo = await platformAccount(two, 1);
      const clients = [openaiClient(one, "/api/v1", accountOne.key), openaiClient(two, "/api/v1", accountTwo.key)];
      // Three failures within a minute, counted across both instances.
      for (const client of [clients[0]!, clients[1]!, clients[0]!]) {
        const answer = await client.chat.completions.create({ model: "cool", messages: userMessage("hi") });
        expect(answer.choices[0]!.message.content).toBe("b answers");
      }
      expect(callsTo("cool-a")).toBe(3);
      const viewer = await registerUser(two);
      await eventually(async () => {
        const health = await two.request("/gateway/v1/model-registry/models/cool/health", { headers: bearer(viewer.token) });
        return health.status === 200 && health.body.deployments[0].coolingDown === true && health.body.deployments[1].coolingDown === false;
      });
      for (const client of [clients[0]!, clients[1]!, clients[1]!, clients[0]!]) {
        const answer = await client.chat.completions.create({ model: "cool", messages: userMessage("hi") });
        expect(answer.choices[0]!.message.content).toBe("b answers");
      }
      expect(callsTo("cool-a")).toBe(3);
      const health = await two.request("/gateway/v1/model-registry/models/cool/health", { headers: bearer(viewer.token) });
      // (The mock serves no models list, so the active probe also reports it down.)
      expect(health.body.status).not.toBe("healthy");
      expect(health.body.reasons.join(" ")).toMatch(/deployment 0 \(openai-compatible cool-a\) is cooling down until/);
      for (const instance of [one, two]) {
        const metrics = await loopbackFetch(instance.url("/metrics")).then((res) => res.text());
        expect(metrics).toContain('gateway_model_deployment_cooldown{model="cool",deployment="0"} 1');
        expect(metrics).toContain('gateway_model_deployment_cooldown{model="cool",deployment="1"} 0');
      }

      // The cooldown ends on both instances after cooldownSeconds (a fake clock): skipped a
      // second before its end, used again a second after it.
      const until = Date.parse(health.body.deployments[0].cooldownUntil);
      expect(until - Date.now()).toBeGreaterThan(20_000);
      expect(until - Date.now()).toBeLessThanOrEqual(30_000);
      upstream.script("cool-a", { kind: "reply", words: ["a", " is", " back"] });
      vi.useFakeTimers({ toFake: ["Date"], now: until - 1000 });
      try {
        for (const client of clients)
          expect((await client.chat.completions.create({ model: "cool", messages: userMessage("hi") })).choices[0]!.message.content).toBe(
            "b answers",
          );
        expect(callsTo("cool-a")).toBe(3);
        vi.setSystemTime(until + 1000);
        for (const client of clients)
          expect((await client.chat.completions.create({ model: "cool", messages: userMessage("hi") })).choices[0]!.message.content).toBe(
            "a is back",
          );
        expect(callsTo("cool-a")).toBe(5);
        const after = await two.request("/gateway/v1/model-registry/models/cool/health", { headers: bearer(viewer.token) });
        expect(after.body.deployments[0]).toMatchObject({ coolingDown: false, cooldownUntil: null });
      } finally {
        vi.useRealTimers();
      }
    } finally {
      await one.close();
      await two.close();
      await dropRedisPrefix(prefix);
    }
  }, 120_000);
});
