import type { ChatChunk, ChatRequest, Provider, ProviderResult } from "./types.js";
import { layered } from "../layers.js";

/** One finished provider call, for the model registry's passive health (docs/model-registry.md). */
export interface CallSample {
  model: string;
  ok: boolean;
  /** Request sent until the answer ended (the last chunk when streamed). */
  latencyMs: number;
  /** Request sent until the first byte of the answer (the first chunk when streamed). */
  ttftMs?: number;
  error?: string;
  at: number;
}

export type CallObserver = (sample: CallSample) => void;

/** Client mistakes (4xx other than 408 and 429) and calls the client abandoned say nothing about the upstream. */
export function countsAsFailure(error: unknown, signal: AbortSignal): boolean {
  if (signal.aborted) return false;
  const status = (error as { status?: unknown })?.status;
  return !(typeof status === "number" && status >= 400 && status < 500 && status !== 408 && status !== 429);
}

export function describeError(error: unknown): string {
  const status = (error as { status?: unknown })?.status;
  const message = error instanceof Error ? error.message : String(error);
  return (typeof status === "number" ? `${status} ` : "") + message.slice(0, 300);
}

/**
 * Wraps a provider so every call reports its outcome and timings once, without changing what
 * the caller sees. Streams are timed to their first chunk (TTFT) and their end.
 */
export function observedProvider(id: string, provider: Provider, observe: () => CallObserver | undefined): Provider {
  return {
    async complete(request: ChatRequest, signal: AbortSignal, trace?: { traceparent?: string }): Promise<ProviderResult> {
      // Durations on the monotonic clock; wall-clock time only for when it happened.
      const started = performance.now();
      const report = (ok: boolean, ttftMs?: number, error?: unknown) => {
        const observer = observe();
        if (!observer) return;
        const sample: CallSample = { model: id, ok, latencyMs: Math.round(performance.now() - started), at: Date.now() };
        if (ttftMs !== undefined) sample.ttftMs = ttftMs;
        if (error !== undefined) sample.error = describeError(error);
        observer(sample);
      };
      let result: ProviderResult;
      try {
        result = await provider.complete(request, signal, trace);
      } catch (error) {
        if (countsAsFailure(error, signal)) report(false, undefined, error);
        throw error;
      }
      if (result.kind === "completion") {
        const elapsed = Math.round(performance.now() - started);
        report(true, elapsed);
        return result;
      }
      // A layer over the stream (rpc/layers.ts): no promise of its own per chunk.
      let ttftMs: number | undefined;
      let open = true;
      const finish = (failed?: unknown) => {
        if (!open) return;
        open = false;
        if (failed === undefined) report(true, ttftMs);
        else if (countsAsFailure(failed, signal)) report(false, ttftMs, failed);
      };
      const chunks = layered<ChatChunk, ChatChunk>(result.chunks[Symbol.asyncIterator](), {
        step(step) {
          if (step.done) finish();
          else ttftMs ??= Math.round(performance.now() - started);
          return step;
        },
        error(error) {
          finish(error);
          throw error;
        },
        stop(below) {
          // A consumer that stops after the first chunk: the call went well as far as it went.
          if (ttftMs !== undefined) finish();
          else open = false;
          return below();
        },
      });
      return { ...result, kind: "stream", chunks };
    },
  };
}
