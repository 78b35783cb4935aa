import { afterEach, describe, expect, it, vi } from "vitest";
import { ServiceError } from "../../../rpc/errors.js";
import {
  BACKOFF_BASE_MS,
  Deployment,
  DeploymentHealth,
  RETRY_AFTER_MAX_MS,
  RoutingProvider,
  backoffMs,
  type RouteTarget,
  type Routing,
} from "../../../rpc/chat/routing.js";
import { ModelRouter } from "../../../rpc/chat/model-router.js";
import { loadModels } from "../../../rpc/chat/models-config.js";
import { classifyFailure, parseRetryAfter } from "../../../rpc/chat/upstream-failure.js";
import { openStore } from "../../../storage/store.js";
import { DeploymentsRepo } from "../../../storage/repos/deployments.js";
import type { ChatRequest, Provider, ProviderResult } from "../../../rpc/chat/types.js";

/**
 * The routing rules (docs/providers.md) on in-process providers, with fake timers for the
 * backoff, Retry-After and the cooldown. The same rules over HTTP: deployments.test.ts.
 */

type Script = (call: number) => ProviderResult | Error;

function scripted(name: string, script: Script, log: string[]): Provider {
  let calls = 0;
  return {
    async complete() {
      log.push(name);
      const outcome = script(calls++);
      if (outcome instanceof Error) throw outcome;
      return outcome;
    },
  };
}

const ok = (text: string): ProviderResult => ({
  kind: "completion",
  completion: {
    id: "c",
    object: "chat.completion",
    model: "m",
    choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  },
});
const upstreamError = (status: number, headers?: Record<string, string>, body: unknown = { error: { message: `status ${status}` } }) =>
  new ServiceError("UPSTREAM", `status ${status}`, { status, upstreamBody: body, ...(headers ? { headers } : {}) });

const request: ChatRequest = { model: "m", messages: [{ role: "user", content: "hi" }] };

function target(
  id: string,
  providers: Provider[],
  options: Partial<Pick<RouteTarget, "retries" | "routing" | "cooldownMs" | "contextWindow">> & { weights?: number[] } = {},
): RouteTarget {
  const deployments = providers.map(
    (provider, index) =>
      new Deployment(id, index, { provider: "echo", weight: options.weights?.[index] ?? 1 }, provider, { input: 1000, output: 1000 }),
  );
  const model: RouteTarget = {
    id,
    contextWindow: options.contextWindow ?? 8192,
    deployments,
    routing: options.routing ?? ("weighted" as Routing),
    retries: options.retries ?? providers.length - 1,
    cooldownMs: options.cooldownMs ?? 30_000,
    candidates: [],
    disabled: () => false,
  };
  model.candidates = [model];
  return model;
}

const health = (...targets: RouteTarget[]) =>
  new DeploymentHealth(
    (model, index) => targets.find((t) => t.id === model)?.deployments[index],
    () => targets.flatMap((t) => t.deployments),
  );

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("what is retried", () => {
  it("retryable: 408, 429, 5xx, 529, timeouts and connection errors; never 400, 401, 403, 404, 413, 422", () => {
    for (const status of [408, 429, 500, 502, 503, 504, 529]) expect(classifyFailure(upstreamError(status)).retryable).toBe(true);
    for (const status of [400, 401, 403, 404, 413, 422]) expect(classifyFailure(upstreamError(status)).retryable).toBe(false);
    expect(classifyFailure(new ServiceError("TIMEOUT", "no answer")).retryable).toBe(true);
    expect(classifyFailure(new ServiceError("BAD_GATEWAY", "unreachable")).retryable).toBe(true);
    expect(classifyFailure(new TypeError("fetch failed")).retryable).toBe(true);
    // An adapter's own flag wins.
    expect(classifyFailure(Object.assign(upstreamError(500), { retryable: false })).retryable).toBe(false);
    expect(
      classifyFailure(upstreamError(400, undefined, { error: { code: "context_length_exceeded", message: "too long" } })).contextWindow,
    ).toBe(true);
    expect(
      classifyFailure(
        upstreamError(400, undefined, {
          error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" },
        }),
      ).contextWindow,
    ).toBe(true);
    expect(classifyFailure(upstreamError(400)).contextWindow).toBe(false);
  });

  it("Retry-After as seconds or an HTTP date", () => {
    expect(parseRetryAfter("3")).toBe(3000);
    expect(parseRetryAfter("0.5")).toBe(500);
    expect(parseRetryAfter(new Date(Date.now() + 10_000).toUTCString())).toBeGreaterThan(8000);
    expect(parseRetryAfter("soon")).toBeUndefined();
    expect(classifyFailure(upstreamError(429, { "Retry-After": "7" })).retryAfterMs).toBe(7000);
  });

  it("backoff doubles from 500 ms with jitter between half and all of it, at most 8 s", () => {
    expect(backoffMs(0, () => 1)).toBe(BACKOFF_BASE_MS);
    expect(backoffMs(0, () => 0)).toBe(BACKOFF_BASE_MS / 2);
    expect(backoffMs(2, () => 1)).toBe(BACKOFF_BASE_MS * 4);
    expect(backoffMs(20, () => 1)).toBe(8000);
  });
});

describe("retries", () => {
  it("the same deployment is tried again only after a backoff, and at least its Retry-After", async () => {
    vi.useFakeTimers();
    vi.spyOn(Math, "random").mockReturnValue(0.999);
    const log: string[] = [];
    const only = scripted("a", (call) => (call === 0 ? upstreamError(429, { "retry-after": "3" }) : ok("later")), log);
    const model = target("m", [only], { retries: 2 });
    const pending = new RoutingProvider(model, health(model)).complete(request, new AbortController().signal);
    await vi.advanceTimersByTimeAsync(2900);
    expect(log).toEqual(["a"]);
    await vi.advanceTimersByTimeAsync(200);
    const result = await pending;
    expect(log).toEqual(["a", "a"]);
    expect(result.kind === "completion" && result.completion.choices[0]!.message.content).toBe("later");
  });

  it("a Retry-After beyond the bound ends the attempts at that deployment: the upstream's error is relayed", async () => {
    vi.useFakeTimers();
    const log: string[] = [];
    const model = target("m", [scripted("a", () => upstreamError(429, { "retry-after": String(RETRY_AFTER_MAX_MS / 1000 + 1) }), log)], {
      retries: 3,
    });
    const error = await new RoutingProvider(model, health(model)).complete(request, new AbortController().signal).catch((e: unknown) => e);
    expect((error as ServiceError).status).toBe(429);
    expect(log).toEqual(["a"]);
  });

  it("exponential backoff between attempts at deployments already tried", async () => {
    vi.useFakeTimers();
    vi.spyOn(Math, "random").mockReturnValue(0.999);
    const log: string[] = [];
    const model = target("m", [scripted("a", () => upstreamError(503), log), scripted("b", () => upstreamError(503), log)], { retries: 4 });
    const pending = new RoutingProvider(model, health(model)).complete(request, new AbortController().signal).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(0);
    // Two deployments at once, then the retries wait 500 ms, then 1 s, then 2 s.
    expect(log.length).toBe(2);
    await vi.advanceTimersByTimeAsync(499);
    expect(log.length).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(log.length).toBe(3);
    await vi.advanceTimersByTimeAsync(999);
    expect(log.length).toBe(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(log.length).toBe(4);
    await vi.advanceTimersByTimeAsync(2000);
    expect(log.length).toBe(5);
    expect(((await pending) as ServiceError).status).toBe(503);
  });

  it("a cancelled request stops waiting at once", async () => {
    vi.useFakeTimers();
    const log: string[] = [];
    const model = target("m", [scripted("a", () => upstreamError(500), log)], { retries: 3 });
    const controller = new AbortController();
    const pending = new RoutingProvider(model, health(model)).complete(request, controller.signal).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(10);
    controller.abort(new Error("client left"));
    expect(((await pending) as Error).message).toBe("client left");
    expect(log).toEqual(["a"]);
  });
});

describe("cooldown", () => {
  it("3 failures within a minute skip a deployment for cooldownSeconds, counted in the shared store; it comes back after", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const store = await openStore({ STORAGE: "memory", DATA_DIR: "", REDIS_URL: "", REDIS_PREFIX: "" } as never);
    const log: string[] = [];
    let failing = true;
    const model = target("m", [scripted("a", () => (failing ? upstreamError(500) : ok("a")), log), scripted("b", () => ok("b"), log)], {
      weights: [1, 0],
      cooldownMs: 30_000,
    });
    const shared = health(model);
    const stop = await shared.share(new DeploymentsRepo(store), store.bus);
    const provider = new RoutingProvider(model, shared);
    const run = async () => {
      const result = await provider.complete(request, new AbortController().signal);
      await new Promise((resolve) => setImmediate(resolve));
      return result.kind === "completion" ? result.completion.choices[0]!.message.content : undefined;
    };
    for (let i = 0; i < 3; i++) expect(await run()).toBe("b");
    expect(log.filter((name) => name === "a")).toHaveLength(3);
    expect(model.deployments[0]!.coolUntil).toBeGreaterThan(Date.now());
    expect(await shared.cooldownUntil(model.deployments[0]!)).toBe(model.deployments[0]!.coolUntil);
    failing = false;
    vi.setSystemTime(Date.now() + 29_000);
    expect(await run()).toBe("b");
    expect(log.filter((name) => name === "a")).toHaveLength(3);
    vi.setSystemTime(Date.now() + 2_000);
    expect(await run()).toBe("a");
    await stop();
    await store.close();
  });

  it("failures spread over more than a minute do not", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const log: string[] = [];
    const model = target("m", [scripted("a", () => upstreamError(500), log), scripted("b", () => ok("b"), log)], { weights: [1, 0] });
    const provider = new RoutingProvider(model, health(model));
    for (let i = 0; i < 4; i++) {
      await provider.complete(request, new AbortController().signal);
      await new Promise((resolve) => setImmediate(resolve));
      vi.setSystemTime(Date.now() + 31_000);
    }
    expect(log.filter((name) => name === "a")).toHaveLength(4);
    expect(model.deployments[0]!.coolUntil).toBe(0);
  });

  it("when every deployment is cooling down, one is tried rather than the request refused", async () => {
    const log: string[] = [];
    const model = target("m", [scripted("a", () => ok("a"), log)]);
    model.deployments[0]!.coolUntil = Date.now() + 60_000;
    const result = await new RoutingProvider(model, health(model)).complete(request, new AbortController().signal);
    expect(result.kind === "completion" && result.completion.choices[0]!.message.content).toBe("a");
  });
});

describe("routing", () => {
  it("least-busy sends to the deployment with the fewest requests in flight", async () => {
    const log: string[] = [];
    const model = target("m", [scripted("a", () => ok("a"), log), scripted("b", () => ok("b"), log)], { routing: "least-busy" });
    model.deployments[0]!.inFlight = 5;
    const provider = new RoutingProvider(model, health(model));
    for (let i = 0; i < 10; i++) await provider.complete(request, new AbortController().signal);
    expect(log).toEqual(Array(10).fill("b"));
  });

  it("latency prefers the lowest time to first byte and still explores", async () => {
    const log: string[] = [];
    const model = target("m", [scripted("a", () => ok("a"), log), scripted("b", () => ok("b"), log)], { routing: "latency" });
    const provider = new RoutingProvider(model, health(model));
    await provider.complete(request, new AbortController().signal);
    await provider.complete(request, new AbortController().signal);
    // Both measured; now pretend a is slow.
    model.deployments[0]!.ttftMs = 1e9;
    model.deployments[1]!.ttftMs = 1;
    log.length = 0;
    const random = vi.spyOn(Math, "random");
    random.mockReturnValue(0.5);
    for (let i = 0; i < 5; i++) await provider.complete(request, new AbortController().signal);
    expect(log).toEqual(Array(5).fill("b"));
    random.mockReturnValue(0.01);
    model.deployments[1]!.ttftMs = 1;
    await provider.complete(request, new AbortController().signal);
    expect(log.at(-1)).toBe("a");
  });
});

describe("the models document", () => {
  it("accepts the documented shape and keeps the single-upstream entry as a one-deployment shorthand", () => {
    const models = loadModels({
      MODELS_JSON: JSON.stringify({
        models: {
          smart: {
            deployments: [
              {
                provider: "openai-compatible",
                baseURL: "https://api.openai.com/v1",
                apiKeyEnv: "OPENAI_API_KEY",
                upstreamModel: "gpt-4o",
                weight: 3,
                rpm: 60,
                tpm: 100000,
                timeoutSeconds: 20,
                price: { input: 2500, output: 10000 },
              },
              { provider: "echo", weight: 1 },
            ],
            routing: "latency",
            retries: 2,
            fallbacks: ["cheap"],
            cooldownSeconds: 30,
            price: { input: 3000, output: 15000 },
          },
          cheap: { provider: "echo", price: { input: 100, output: 200 } },
        },
      }),
    });
    const router = new ModelRouter(models, { MODEL_TIMEOUT_SECONDS: 60 }, {});
    const smart = router.get("smart")!;
    expect(smart.deployments.map((d) => [d.config.provider, d.weight, d.price])).toEqual([
      ["openai-compatible", 3, { input: 2500, output: 10000 }],
      ["echo", 1, { input: 3000, output: 15000 }],
    ]);
    expect(smart.candidates.map((c) => c.id)).toEqual(["smart", "cheap"]);
    expect(router.get("cheap")!.deployments).toHaveLength(1);
    // The hold: the dearest deployment across the model and its fallbacks.
    expect(router.maxCost(smart, 10, 100)).toBe(Math.ceil((10 * 3000 + 100 * 15000) / 1000));
  });

  it("refuses unknown routing, fallbacks to unknown models or to itself, and an empty deployment list", () => {
    const load = (models: unknown) => () => loadModels({ MODELS_JSON: JSON.stringify({ models }) });
    expect(load({ a: { deployments: [{ provider: "echo" }], routing: "random" } })).toThrow(
      /routing must be weighted, least-busy or latency/,
    );
    expect(load({ a: { provider: "echo", fallbacks: ["nope"] } })).toThrow(/unknown model 'nope'/);
    expect(load({ a: { provider: "echo", fallbacks: ["a"] } })).toThrow(/fall back to itself/);
    expect(load({ a: { deployments: [] } })).toThrow(/deployments must not be empty/);
    expect(load({ a: { deployments: [{ provider: "mystery" }] } })).toThrow(/provider must be/);
  });
});
