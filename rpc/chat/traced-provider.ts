import type { Metrics } from "../metrics.js";
import { failSpan, SpanKind, spanTraceparent, startSpan, tracingEnabled, type Span } from "../tracing.js";
import { layered } from "../layers.js";
import type { DeploymentConfig } from "./models-config.js";
import type { ChatChunk, ChatCompletion, ChatRequest, Provider, ProviderResult } from "./types.js";

/** What a provider call knows of its place in the request: the caller's trace, and which attempt it is (routing.ts). */
export interface AttemptTrace {
  traceparent?: string;
  /** 0 for the first attempt at a model, 1 for its first retry, … */
  retry?: number;
  /** The model the request named, when this attempt is on one of its fallbacks. */
  fallbackFrom?: string;
}

/** The GenAI semantic conventions' provider names (`gen_ai.provider.name`). */
export const GEN_AI_PROVIDER: Record<DeploymentConfig["provider"], string> = {
  echo: "gateway.echo",
  "openai-compatible": "openai",
  "azure-openai": "azure.ai.openai",
  anthropic: "anthropic",
  gemini: "gcp.gemini",
  bedrock: "aws.bedrock",
};

/** An attempt's outcome as a bounded label: the upstream's status class, `timeout`, `cancelled` or `error`. */
export function statusClassOf(error: unknown, signal: AbortSignal): string {
  if (signal.aborted) return "cancelled";
  const status = (error as { status?: unknown })?.status;
  if (typeof status === "number") return `${Math.floor(status / 100)}xx`;
  return (error as { code?: unknown })?.code === "TIMEOUT" ? "timeout" : "error";
}

/**
 * Wraps one deployment's provider: every attempt is timed into
 * `gateway_model_deployment_latency_seconds` (model, deployment, provider, status class: until
 * the upstream answered, its headers for a stream), and while tracing it is a client span with
 * the GenAI attributes (docs/observability.md "Traces"): operation, provider, requested and
 * answering model, tokens, finish reasons, plus the deployment, the retry number and the model
 * fallen back from. The span continues as the upstream's `traceparent`; a streamed answer ends
 * it at its last chunk. No prompt or completion text is recorded.
 */
export function tracedProvider(
  model: string,
  index: number,
  config: DeploymentConfig,
  provider: Provider,
  metrics: () => Metrics | undefined,
): Provider {
  const deployment = String(index);
  const upstreamModel = ("upstreamModel" in config ? config.upstreamModel : undefined) ?? model;
  const latency = (outcome: string, started: number) =>
    metrics()
      ?.deploymentLatency(model, deployment, config.provider, outcome)
      .observe((performance.now() - started) / 1000);
  return {
    async complete(request: ChatRequest, signal: AbortSignal, trace?: AttemptTrace): Promise<ProviderResult> {
      const started = performance.now();
      const span = tracingEnabled() ? attemptSpan(model, deployment, upstreamModel, config, request, trace) : undefined;
      let result: ProviderResult;
      try {
        result = await provider.complete(request, signal, span ? { traceparent: spanTraceparent(span) } : trace);
      } catch (error) {
        latency(statusClassOf(error, signal), started);
        failSpan(span, error);
        span?.end();
        throw error;
      }
      latency("2xx", started);
      if (!span) return result;
      if (result.kind === "completion") {
        answered(span, result.completion);
        span.end();
        return result;
      }
      // A span nobody samples needs nothing from the stream.
      if (!span.isRecording()) {
        span.end();
        return result;
      }
      return { ...result, kind: "stream", chunks: watched(result.chunks, span) };
    },
  };
}

function attemptSpan(
  model: string,
  deployment: string,
  upstreamModel: string,
  config: DeploymentConfig,
  request: ChatRequest,
  trace: AttemptTrace | undefined,
): Span | undefined {
  const span = startSpan(`chat ${upstreamModel}`, SpanKind.CLIENT, {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": GEN_AI_PROVIDER[config.provider],
    "gen_ai.system": GEN_AI_PROVIDER[config.provider],
    "gen_ai.request.model": upstreamModel,
    "gateway.model": model,
    "gateway.deployment": deployment,
    "gateway.provider": config.provider,
    "gateway.retry": trace?.retry ?? 0,
    "gateway.stream": request.stream === true,
  });
  if (!span) return undefined;
  if (trace?.fallbackFrom) span.setAttribute("gateway.fallback_from", trace.fallbackFrom);
  if (request.max_tokens !== undefined) span.setAttribute("gen_ai.request.max_tokens", request.max_tokens);
  if (request.temperature !== undefined) span.setAttribute("gen_ai.request.temperature", request.temperature);
  if (request.top_p !== undefined) span.setAttribute("gen_ai.request.top_p", request.top_p);
  return span;
}

function answered(span: Span, completion: ChatCompletion): void {
  if (completion.model) span.setAttribute("gen_ai.response.model", completion.model);
  if (completion.id) span.setAttribute("gen_ai.response.id", completion.id);
  const reasons = completion.choices?.flatMap((choice) => (choice.finish_reason ? [choice.finish_reason] : [])) ?? [];
  if (reasons.length) span.setAttribute("gen_ai.response.finish_reasons", reasons);
  if (completion.usage) {
    span.setAttribute("gen_ai.usage.input_tokens", completion.usage.prompt_tokens);
    span.setAttribute("gen_ai.usage.output_tokens", completion.usage.completion_tokens);
  }
}

/**
 * A sampled streamed attempt: the chunks as they come, noting the answering model, finish
 * reasons and usage for the span, which ends with the stream (finished, failed or abandoned).
 */
function watched(chunks: AsyncIterable<ChatChunk>, span: Span): AsyncIterable<ChatChunk> {
  const seen: ChatCompletion = { id: "", object: "chat.completion", model: "", choices: [] };
  let open = true;
  const end = (error?: unknown) => {
    if (!open) return;
    open = false;
    if (error !== undefined) failSpan(span, error);
    answered(span, seen);
    span.end();
  };
  // A layer over the stream (rpc/layers.ts): no promise of its own per chunk.
  return layered<ChatChunk, ChatChunk>(chunks[Symbol.asyncIterator](), {
    step(step) {
      if (step.done) {
        end();
        return step;
      }
      const chunk = step.value;
      if (!seen.model && chunk.model) seen.model = chunk.model;
      if (!seen.id && chunk.id) seen.id = chunk.id;
      if (chunk.usage) seen.usage = chunk.usage;
      const reason = chunk.choices?.[0]?.finish_reason;
      if (reason) seen.choices.push({ message: { role: "assistant", content: null }, finish_reason: reason });
      return step;
    },
    error(error) {
      end(error);
      throw error;
    },
    stop(below) {
      end();
      return below();
    },
  });
}
