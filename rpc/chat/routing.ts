import { Counter, Gauge } from "prom-client";
import { ServiceError } from "../errors.js";
import type { Metrics } from "../metrics.js";
import { layered } from "../layers.js";
import type { Bus } from "../../storage/bus.js";
import type { DeploymentsRepo } from "../../storage/repos/deployments.js";
import type { DeploymentConfig, ModelPrice } from "./models-config.js";
import type { ChatChunk, ChatRequest, Provider, ProviderResult } from "./types.js";
import type { AttemptTrace } from "./traced-provider.js";
import { classifyFailure } from "./upstream-failure.js";

/**
 * Deployments, retries, fallbacks and cooldowns (docs/providers.md "Deployments" and "What is
 * retried"). A model lists deployments; a request goes to one picked by the model's `routing`,
 * and while nothing has reached the client, a retryable failure is tried again on another
 * deployment, then on the model's fallbacks. A deployment that failed 3 times within a minute
 * is skipped for `cooldownSeconds`, on every instance (shared through storage).
 */

/** Failures within this window that put a deployment in cooldown. */
export const COOLDOWN_FAILURES = 3;
export const FAILURE_WINDOW_MS = 60_000;
export const DEFAULT_COOLDOWN_SECONDS = 30;
/** Backoff before a deployment is tried again in the same request: 500 ms, 1 s, 2 s … at most 8 s, with jitter. */
export const BACKOFF_BASE_MS = 500;
export const BACKOFF_MAX_MS = 8_000;
/** The longest upstream `Retry-After` waited for; a longer one ends the attempts at that deployment. */
export const RETRY_AFTER_MAX_MS = 10_000;
/** Share of requests that `latency` routing sends to a random deployment, so every one keeps being measured. */
export const LATENCY_EXPLORATION = 0.1;
const CAPACITY_WINDOW_MS = 60_000;

export type Routing = "weighted" | "least-busy" | "latency";

/** One upstream of a model, with what routing knows of it on this instance. */
export class Deployment {
  readonly model: string;
  readonly index: number;
  readonly config: DeploymentConfig;
  readonly provider: Provider;
  readonly price: ModelPrice;
  readonly weight: number;
  /** Requests to it in flight from this instance (`least-busy`). */
  inFlight = 0;
  /** Moving average of its time to first byte, ms (`latency`). */
  ttftMs: number | undefined;
  /** End of its cooldown (epoch ms) as this instance knows it; 0 when none. */
  coolUntil = 0;
  /** Failure times, when no shared store counts them (a router used alone). */
  readonly localFailures: number[] = [];

  constructor(model: string, index: number, config: DeploymentConfig, provider: Provider, price: ModelPrice) {
    this.model = model;
    this.index = index;
    this.config = config;
    this.provider = provider;
    this.price = price;
    this.weight = config.weight;
  }

  get limited(): boolean {
    return this.config.rpm !== undefined || this.config.tpm !== undefined;
  }

  observeTtft(ms: number): void {
    this.ttftMs = this.ttftMs === undefined ? ms : this.ttftMs * 0.8 + ms * 0.2;
  }
}

/** A model as routing sees it: its deployments, how it picks one, and what it falls back to. */
export interface RouteTarget {
  id: string;
  contextWindow: number;
  deployments: Deployment[];
  routing: Routing;
  retries: number;
  cooldownMs: number;
  /** The model itself, then its fallbacks in order (resolved once every model exists). */
  candidates: RouteTarget[];
  /** The registry disabled it: it is not used as a fallback. */
  disabled(): boolean;
}

/**
 * The deployment that answered a result, so the request is settled at its price: a symbol-keyed
 * field of the result (a WeakMap entry per request costs several times more, and GC work).
 */
const SERVED_BY = Symbol("servedBy");

function serve<T extends ProviderResult>(result: T, deployment: Deployment): T {
  (result as T & { [SERVED_BY]?: Deployment })[SERVED_BY] = deployment;
  return result;
}

export function deploymentOf(result: ProviderResult | undefined): Deployment | undefined {
  return (result as { [SERVED_BY]?: Deployment } | undefined)?.[SERVED_BY];
}

/**
 * Shared deployment state: cooldowns and capacity counted in storage for every instance, with
 * this instance's view of cooldowns kept current through the bus (so picking a deployment
 * reads memory only). Without a store (a router used alone), failures are counted in memory.
 */
export class DeploymentHealth {
  #repo: DeploymentsRepo | undefined;
  #bus: Bus | undefined;
  #unsubscribe: (() => Promise<void>) | undefined;
  #metrics:
    | {
        failures: Counter<"model" | "deployment">;
        cooldowns: Counter<"model" | "deployment">;
        retries: Counter<"model">;
        fallbacks: Counter<"model" | "fallback">;
      }
    | undefined;
  readonly #find: (model: string, index: number) => Deployment | undefined;
  readonly #all: () => Iterable<Deployment>;

  constructor(find: (model: string, index: number) => Deployment | undefined, all: () => Iterable<Deployment>) {
    this.#find = find;
    this.#all = all;
  }

  /** Shares state through `repo` and `bus` from now on, and reads the cooldowns running now. */
  async share(repo: DeploymentsRepo, bus: Bus, metrics?: Metrics): Promise<() => Promise<void>> {
    this.#repo = repo;
    this.#bus = bus;
    this.#unsubscribe = await bus.subscribe(CHANNEL, (message) => {
      const { model, index, until } = (message ?? {}) as { model?: unknown; index?: unknown; until?: unknown };
      if (typeof model !== "string" || typeof index !== "number" || typeof until !== "number") return;
      const deployment = this.#find(model, index);
      if (deployment) deployment.coolUntil = Math.max(deployment.coolUntil, until);
    });
    const now = Date.now();
    for (const deployment of this.#all()) {
      if (deployment.config.provider === "echo") continue;
      deployment.coolUntil = Math.max(deployment.coolUntil, await repo.cooldownUntil(deployment, now));
    }
    if (metrics) this.#registerMetrics(metrics);
    return async () => {
      await this.#unsubscribe?.();
      this.#unsubscribe = undefined;
    };
  }

  #registerMetrics(metrics: Metrics): void {
    const registers = [metrics.registry];
    const all = this.#all;
    new Gauge({
      name: "gateway_model_deployment_cooldown",
      help: "1 while a model deployment is skipped after failing 3 times within a minute, by model and deployment (its index in the models document)",
      labelNames: ["model", "deployment"] as const,
      registers,
      collect() {
        const now = Date.now();
        for (const deployment of all())
          this.set({ model: deployment.model, deployment: String(deployment.index) }, deployment.coolUntil > now ? 1 : 0);
      },
    });
    this.#metrics = {
      failures: new Counter({
        name: "gateway_model_deployment_failures_total",
        help: "Failed calls to a model deployment that count towards its cooldown, by model and deployment",
        labelNames: ["model", "deployment"] as const,
        registers,
      }),
      cooldowns: new Counter({
        name: "gateway_model_cooldowns_total",
        help: "Cooldowns this instance started on a model deployment (3 failures within a minute), by model and deployment",
        labelNames: ["model", "deployment"] as const,
        registers,
      }),
      retries: new Counter({
        name: "gateway_model_retries_total",
        help: "Chat requests sent again after a retryable upstream failure, by model",
        labelNames: ["model"] as const,
        registers,
      }),
      fallbacks: new Counter({
        name: "gateway_model_fallbacks_total",
        help: "Chat requests passed to a fallback model, by model and fallback",
        labelNames: ["model", "fallback"] as const,
        registers,
      }),
    };
  }

  retried(model: string): void {
    this.#metrics?.retries.inc({ model });
  }

  fellBack(model: string, fallback: string): void {
    this.#metrics?.fallbacks.inc({ model, fallback });
  }

  /** Counts a failure; the third within a minute starts the deployment's cooldown everywhere. */
  async failed(deployment: Deployment, cooldownMs: number): Promise<void> {
    this.#metrics?.failures.inc({ model: deployment.model, deployment: String(deployment.index) });
    const now = Date.now();
    let count: number;
    if (this.#repo) count = await this.#repo.failed(deployment, FAILURE_WINDOW_MS);
    else {
      const recent = deployment.localFailures.filter((at) => at > now - FAILURE_WINDOW_MS);
      recent.push(now);
      deployment.localFailures.splice(0, deployment.localFailures.length, ...recent);
      count = recent.length;
    }
    if (count < COOLDOWN_FAILURES || cooldownMs <= 0) return;
    let until = now + cooldownMs;
    this.#metrics?.cooldowns.inc({ model: deployment.model, deployment: String(deployment.index) });
    if (this.#repo) until = await this.#repo.coolDown(deployment, until, now);
    else deployment.localFailures.length = 0;
    deployment.coolUntil = Math.max(deployment.coolUntil, until);
    await this.#bus?.publish(CHANNEL, { model: deployment.model, index: deployment.index, until });
  }

  /** True when the deployment's `rpm` and `tpm` leave room for one more request (which is counted). */
  async admits(deployment: Deployment): Promise<boolean> {
    const { rpm, tpm } = deployment.config;
    if (!this.#repo) return true;
    if (tpm !== undefined && (await this.#repo.tokens(deployment)) >= tpm) return false;
    if (rpm !== undefined && (await this.#repo.countRequest(deployment, CAPACITY_WINDOW_MS)) > rpm) return false;
    return true;
  }

  countTokens(deployment: Deployment, tokens: number): void {
    if (deployment.config.tpm === undefined || !this.#repo) return;
    void this.#repo.countTokens(deployment, tokens, CAPACITY_WINDOW_MS).catch(() => undefined);
  }

  /** The end of a deployment's cooldown as storage has it (health pages; 0 when none). */
  async cooldownUntil(deployment: Deployment): Promise<number> {
    const now = Date.now();
    const shared = this.#repo ? await this.#repo.cooldownUntil(deployment, now) : 0;
    const local = deployment.coolUntil > now ? deployment.coolUntil : 0;
    return Math.max(shared, local);
  }
}

const CHANNEL = "model-deployments";

/** Waits `ms`, or rejects when the request is cancelled. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Exponential backoff with jitter: the n-th wait (0-based) is between half and all of base·2ⁿ, capped. */
export function backoffMs(n: number, random = Math.random): number {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** n);
  return Math.round(ceiling * (0.5 + random() * 0.5));
}

function pick(routing: Routing, pool: Deployment[]): Deployment {
  if (pool.length === 1) return pool[0]!;
  if (routing === "least-busy") {
    let least = Infinity;
    let best: Deployment[] = [];
    for (const deployment of pool) {
      if (deployment.inFlight < least) (least = deployment.inFlight), (best = [deployment]);
      else if (deployment.inFlight === least) best.push(deployment);
    }
    return best[Math.floor(Math.random() * best.length)]!;
  }
  if (routing === "latency") {
    const unmeasured = pool.filter((deployment) => deployment.ttftMs === undefined);
    if (unmeasured.length) return unmeasured[Math.floor(Math.random() * unmeasured.length)]!;
    if (Math.random() < LATENCY_EXPLORATION) return pool[Math.floor(Math.random() * pool.length)]!;
    return pool.reduce((best, deployment) => (deployment.ttftMs! < best.ttftMs! ? deployment : best));
  }
  let total = 0;
  for (const deployment of pool) total += deployment.weight;
  if (total <= 0) return pool[Math.floor(Math.random() * pool.length)]!;
  let r = Math.random() * total;
  for (const deployment of pool) {
    r -= deployment.weight;
    if (r < 0) return deployment;
  }
  return pool[pool.length - 1]!;
}

/** What one request went through so far, across its model and fallbacks. */
interface Attempts {
  last: unknown;
  attempted: boolean;
}

/** Nothing was tried: every deployment is at its `rpm`/`tpm`. */
class NoDeployment extends Error {}

/** One attempt at one deployment of a candidate model (the model itself or one of its fallbacks). */
export type Attempt<T> = (deployment: Deployment, candidate: RouteTarget, trace: AttemptTrace | undefined) => Promise<T>;

/**
 * One request's attempts across a model's deployments and fallbacks (docs/providers.md "What
 * is retried"): picks a deployment by the model's routing, makes the attempt, and after a
 * retryable failure tries another deployment, then the same one after a backoff, then the
 * fallbacks; counts failures towards cooldowns and skips deployments cooling down or at
 * capacity. Chat (`RoutingProvider`) and embeddings (rpc/chat/embeddings/router.ts) share it;
 * what one attempt is, and when it counts as answered, is the caller's `attempt`.
 */
export async function routeAttempts<T>(
  target: RouteTarget,
  health: DeploymentHealth,
  signal: AbortSignal,
  trace: AttemptTrace | undefined,
  attempt: Attempt<T>,
): Promise<T> {
  const state: Attempts = { last: undefined, attempted: false };
  const candidates = target.candidates;
  /** The context window that was too small: only a larger one is tried after it. */
  let tooSmall: number | undefined;
  for (let i = 0; i < candidates.length; i++) {
    const candidate = candidates[i]!;
    if (i > 0 && candidate.disabled()) continue;
    if (tooSmall !== undefined && candidate.contextWindow <= tooSmall) continue;
    if (i > 0 && state.attempted) health.fellBack(target.id, candidate.id);
    // When nothing was tried yet and no other candidate remains, a deployment in cooldown is
    // tried rather than the request refused.
    const lastChance = i === candidates.length - 1 && !state.attempted;
    try {
      const traced = i === 0 ? trace : { ...trace, fallbackFrom: target.id };
      return await attemptModel(health, candidate, signal, traced, state, lastChance, attempt);
    } catch (error) {
      if (error instanceof NoDeployment) continue;
      if (signal.aborted) throw error;
      const failure = classifyFailure(error);
      if (failure.contextWindow) {
        tooSmall = candidate.contextWindow;
        continue;
      }
      if (!failure.retryable) throw error;
    }
  }
  if (state.last !== undefined) throw state.last;
  throw new ServiceError("RATE_LIMITED", `Every deployment of the model '${target.id}' is at its configured capacity; try again shortly`);
}

async function attemptModel<T>(
  health: DeploymentHealth,
  target: RouteTarget,
  signal: AbortSignal,
  trace: AttemptTrace | undefined,
  state: Attempts,
  lastChance: boolean,
  attempt: Attempt<T>,
): Promise<T> {
  const tried = new Set<Deployment>();
  const full = new Set<Deployment>();
  const retryAfter = new Map<Deployment, number>();
  let backoffs = 0;
  for (let n = 0; n <= target.retries; n++) {
    const deployment = await choose(health, target, tried, full, lastChance && !state.attempted);
    if (!deployment) break;
    if (tried.has(deployment)) {
      // The same deployment again: back off, at least as long as it asked (up to a bound).
      const asked = retryAfter.get(deployment);
      if (asked !== undefined && asked > RETRY_AFTER_MAX_MS) break;
      await sleep(Math.max(backoffMs(backoffs++), asked ?? 0), signal);
    }
    if (n > 0) health.retried(target.id);
    tried.add(deployment);
    state.attempted = true;
    try {
      return await attempt(deployment, target, n === 0 ? trace : { ...trace, retry: n });
    } catch (error) {
      if (signal.aborted) throw error;
      state.last = error;
      const failure = classifyFailure(error);
      if (failure.countsAgainstDeployment) void health.failed(deployment, target.cooldownMs).catch(() => undefined);
      if (!failure.retryable || failure.contextWindow) throw error;
      if (failure.retryAfterMs !== undefined) retryAfter.set(deployment, failure.retryAfterMs);
    }
  }
  if (tried.size === 0) throw new NoDeployment();
  throw state.last;
}

async function choose(
  health: DeploymentHealth,
  target: RouteTarget,
  tried: Set<Deployment>,
  full: Set<Deployment>,
  ignoreCooldown: boolean,
): Promise<Deployment | undefined> {
  const now = Date.now();
  for (;;) {
    // Untried deployments first, then one already tried (after a backoff); one in cooldown
    // only when there is nothing else at all.
    const all = target.deployments;
    // The usual case, nothing tried and nothing cooling down: the list itself, no copy.
    let pool =
      tried.size === 0 && full.size === 0 && all.every((deployment) => deployment.coolUntil <= now)
        ? all
        : all.filter((deployment) => !tried.has(deployment) && !full.has(deployment) && deployment.coolUntil <= now);
    if (pool.length === 0)
      pool = target.deployments.filter((deployment) => tried.has(deployment) && !full.has(deployment) && deployment.coolUntil <= now);
    if (pool.length === 0 && ignoreCooldown)
      pool = target.deployments.filter((deployment) => !tried.has(deployment) && !full.has(deployment));
    if (pool.length === 0) return undefined;
    const deployment = pick(target.routing, pool);
    if (!deployment.limited || (await health.admits(deployment))) return deployment;
    full.add(deployment);
  }
}

/**
 * The provider of a model with deployments: picks, retries, falls back (`routeAttempts`).
 * Streams are answered once their first chunk arrived, so a stream that fails before it is
 * still retried; after it, bytes may have reached the client and nothing is sent again.
 */
export class RoutingProvider implements Provider {
  readonly #target: RouteTarget;
  readonly #health: DeploymentHealth;

  constructor(target: RouteTarget, health: DeploymentHealth) {
    this.#target = target;
    this.#health = health;
  }

  complete(request: ChatRequest, signal: AbortSignal, trace?: AttemptTrace): Promise<ProviderResult> {
    return routeAttempts(this.#target, this.#health, signal, trace, (deployment, target, attempt) =>
      this.#call(deployment, target, request, signal, attempt),
    );
  }

  async #call(
    deployment: Deployment,
    target: RouteTarget,
    request: ChatRequest,
    signal: AbortSignal,
    trace: AttemptTrace | undefined,
  ): Promise<ProviderResult> {
    const started = performance.now();
    deployment.inFlight++;
    let result: ProviderResult;
    try {
      result = await deployment.provider.complete(request, signal, trace);
    } catch (error) {
      deployment.inFlight--;
      throw error;
    }
    if (result.kind === "completion") {
      deployment.inFlight--;
      deployment.observeTtft(performance.now() - started);
      if (result.completion.usage) this.#health.countTokens(deployment, result.completion.usage.total_tokens);
      return serve(result, deployment);
    }
    const upstream = result.chunks[Symbol.asyncIterator]();
    let first: IteratorResult<ChatChunk>;
    try {
      // Nothing has reached the client until this chunk: a failure here may still be retried.
      first = await upstream.next();
    } catch (error) {
      deployment.inFlight--;
      throw error;
    }
    deployment.observeTtft(performance.now() - started);
    return serve({ ...result, kind: "stream", chunks: this.#relay(deployment, target, upstream, first, signal) }, deployment);
  }

  /** The stream from its first chunk on, a layer over it (rpc/layers.ts): no promise of its own per chunk. */
  #relay(
    deployment: Deployment,
    target: RouteTarget,
    upstream: AsyncIterator<ChatChunk>,
    first: IteratorResult<ChatChunk>,
    signal: AbortSignal,
  ): AsyncIterable<ChatChunk> {
    const health = this.#health;
    let open = true;
    const end = () => {
      if (!open) return;
      open = false;
      deployment.inFlight--;
    };
    if (first.done) end();
    // The first step was taken before answering; it goes up as it came.
    let taken = true;
    return layered<ChatChunk, ChatChunk>(
      upstream,
      {
        step(step) {
          if (step.done) end();
          else if (!taken && step.value.usage) health.countTokens(deployment, step.value.usage.total_tokens);
          taken = false;
          return step;
        },
        error(error) {
          end();
          if (!signal.aborted && classifyFailure(error).countsAgainstDeployment)
            void health.failed(deployment, target.cooldownMs).catch(() => undefined);
          throw error;
        },
        stop(below) {
          end();
          return below();
        },
      },
      first,
    );
  }
}
