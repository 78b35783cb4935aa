import type { Config } from "../../config.js";
import type { Metrics } from "../../metrics.js";
import { failSpan, SpanKind, spanTraceparent, startSpan, tracingEnabled } from "../../tracing.js";
import type { ModelRouter, RoutedModel } from "../model-router.js";
import { modeOf, providerConfigOf } from "../models-config.js";
import { countsAsFailure, describeError } from "../observed-provider.js";
import { routeAttempts, type Deployment } from "../routing.js";
import { GEN_AI_PROVIDER, statusClassOf, type AttemptTrace } from "../traced-provider.js";
import { createEmbedder } from "./create-embedder.js";
import type { Embedder, EmbeddingResult } from "./embedder.js";
import type { EmbeddingRequest } from "./request.js";

/** What a routed embeddings call gave, and the deployment that answered (its price is the request's). */
export interface Embedded {
  result: EmbeddingResult;
  deployment: Deployment;
}

/**
 * Embeddings through the model router (docs/embeddings.md "Routing"): every deployment of an
 * embedding model has its embeddings adapter, and a request runs the router's attempt loop
 * (rpc/chat/routing.ts `routeAttempts`): the model's routing rule, retries with backoff on
 * another deployment, fallbacks to other embedding models, cooldowns shared by every instance,
 * `rpm`/`tpm` capacity. An embeddings answer is whole or nothing, so every retryable failure is
 * retried. Each attempt is timed into `gateway_model_deployment_latency_seconds`, reported to the
 * model registry's passive health, and, while tracing, is a client span (`embeddings <model>`).
 */
export class Embeddings {
  readonly #models: ModelRouter;
  readonly #metrics: Metrics | undefined;
  readonly #embedders = new Map<Deployment, Embedder>();

  constructor(models: ModelRouter, config: Pick<Config, "MODEL_TIMEOUT_SECONDS">, metrics?: Metrics) {
    this.#models = models;
    this.#metrics = metrics;
    for (const { id } of models.list()) {
      const model = models.get(id)!;
      if (modeOf(model.config) !== "embedding") continue;
      const timeoutSeconds = ("deployments" in model.config ? model.config.timeoutSeconds : undefined) ?? config.MODEL_TIMEOUT_SECONDS;
      for (const deployment of model.deployments) {
        const settings = providerConfigOf(model.config, deployment.config);
        this.#embedders.set(deployment, createEmbedder(id, settings, { timeoutSeconds, env: models.env }));
      }
    }
  }

  /** Embeds on the model (an embedding model, `ModelRouter.resolve(id, plan, "embedding")`), its deployments and fallbacks. */
  embed(model: RoutedModel, request: EmbeddingRequest, signal: AbortSignal, trace: AttemptTrace = {}): Promise<Embedded> {
    return routeAttempts(model, this.#models.health, signal, trace, (deployment, candidate, attempt) =>
      this.#attempt(deployment, candidate.id, request, signal, attempt),
    );
  }

  async #attempt(
    deployment: Deployment,
    model: string,
    request: EmbeddingRequest,
    signal: AbortSignal,
    trace: AttemptTrace | undefined,
  ): Promise<Embedded> {
    const embedder = this.#embedders.get(deployment)!;
    const { provider } = deployment.config;
    const upstreamModel = ("upstreamModel" in deployment.config ? deployment.config.upstreamModel : undefined) ?? model;
    const span = tracingEnabled()
      ? startSpan(`embeddings ${upstreamModel}`, SpanKind.CLIENT, {
          "gen_ai.operation.name": "embeddings",
          "gen_ai.provider.name": GEN_AI_PROVIDER[provider],
          "gen_ai.request.model": upstreamModel,
          "gateway.model": model,
          "gateway.deployment": String(deployment.index),
          "gateway.provider": provider,
          "gateway.retry": trace?.retry ?? 0,
          ...(trace?.fallbackFrom ? { "gateway.fallback_from": trace.fallbackFrom } : {}),
        })
      : undefined;
    const started = performance.now();
    const elapsed = () => performance.now() - started;
    const latency = (outcome: string) =>
      this.#metrics?.deploymentLatency(model, String(deployment.index), provider, outcome).observe(elapsed() / 1000);
    deployment.inFlight++;
    try {
      const result = await embedder.embed(request, signal, span ? { traceparent: spanTraceparent(span) } : trace);
      latency("2xx");
      deployment.observeTtft(elapsed());
      if (result.promptTokens !== undefined) {
        span?.setAttribute("gen_ai.usage.input_tokens", result.promptTokens);
        this.#models.health.countTokens(deployment, result.promptTokens);
      }
      this.#models.observer?.({ model, ok: true, latencyMs: Math.round(elapsed()), ttftMs: Math.round(elapsed()), at: Date.now() });
      return { result, deployment };
    } catch (error) {
      latency(statusClassOf(error, signal));
      failSpan(span, error);
      if (countsAsFailure(error, signal))
        this.#models.observer?.({ model, ok: false, latencyMs: Math.round(elapsed()), error: describeError(error), at: Date.now() });
      throw error;
    } finally {
      deployment.inFlight--;
      span?.end();
    }
  }
}
