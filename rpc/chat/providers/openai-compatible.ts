import { ofetch } from "ofetch";
import { ServiceError } from "../../errors.js";
import { readSseData } from "../../sse-parse.js";
import type { ChatChunk, ChatCompletion, ChatRequest, Provider, ProviderResult } from "../types.js";
import type { OpenAiModelConfig } from "../models-config.js";

export interface OpenAiProviderOptions {
  id: string;
  config: OpenAiModelConfig;
  /** MODEL_TIMEOUT_SECONDS unless the model sets its own. */
  timeoutSeconds: number;
  env: Record<string, string | undefined>;
}

/**
 * Any upstream speaking the chat completions wire format. The request carries only the six
 * fields (spec 2.2) plus `stream_options.include_usage` when streaming, so usage can be
 * metered (spec 7.2, issue 3). Upstream errors are relayed verbatim with their status.
 */
export class OpenAiCompatibleProvider implements Provider {
  readonly #options: OpenAiProviderOptions;

  constructor(options: OpenAiProviderOptions) {
    this.#options = options;
  }

  async complete(request: ChatRequest, signal: AbortSignal, trace: { traceparent?: string } = {}): Promise<ProviderResult> {
    const { config, id, env } = this.#options;
    const timeoutMs = (config.timeoutSeconds ?? this.#options.timeoutSeconds) * 1000;
    let apiKey: string | undefined;
    if (config.apiKeyEnv) {
      apiKey = env[config.apiKeyEnv];
      if (!apiKey) throw new ServiceError("UNAVAILABLE", `Chat service not configured: model ${id} needs ${config.apiKeyEnv}`);
    }
    const body: Record<string, unknown> = { ...request, model: config.upstreamModel ?? id };
    if (request.stream) body.stream_options = { include_usage: true };
    // Agent runs offer tools as functions; an empty list is an error upstream, so it is left out.
    if (!request.tools?.length) delete body.tools;

    // One timer covers the wait for the first byte and then each gap between chunks.
    const timer = new IdleTimer(timeoutMs);
    const combined = AbortSignal.any([signal, timer.signal]);
    const url = config.baseURL.replace(/\/+$/, "") + "/chat/completions";
    let response: Response;
    try {
      // ofetch without its retries or error throwing: the raw response is relayed as it is.
      response = await ofetch.raw(url, {
        method: "POST",
        body,
        headers: {
          accept: request.stream ? "text/event-stream" : "application/json",
          ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
          // W3C Trace Context: the caller's trace continues at the provider.
          ...(trace.traceparent ? { traceparent: trace.traceparent } : {}),
        },
        signal: combined,
        retry: 0,
        ignoreResponseError: true,
        responseType: "stream",
      });
    } catch (error) {
      timer.stop();
      throw transportError(error, timer, timeoutMs, id);
    }
    try {
      if (!response.ok) throw await relayedError(response);
      if (!request.stream) {
        const text = await response.text();
        timer.stop();
        let completion: ChatCompletion;
        try {
          completion = JSON.parse(text) as ChatCompletion;
        } catch {
          throw new ServiceError("BAD_GATEWAY", `The model provider sent an invalid response for ${id}`);
        }
        return { kind: "completion", completion };
      }
      if (!response.body) throw new ServiceError("BAD_GATEWAY", `The model provider sent an empty stream for ${id}`);
      return { kind: "stream", chunks: parseChunks(response.body, timer, timeoutMs, id, combined) };
    } catch (error) {
      timer.stop();
      if (error instanceof ServiceError) throw error;
      throw transportError(error, timer, timeoutMs, id);
    }
  }
}

async function* parseChunks(body: ReadableStream<Uint8Array>, timer: IdleTimer, timeoutMs: number, id: string, signal: AbortSignal): AsyncGenerator<ChatChunk> {
  let finished = false;
  try {
    for await (const data of readSseData(body, { onActivity: () => timer.touch(), signal, endAtDone: true })) {
      let chunk: ChatChunk;
      try {
        chunk = JSON.parse(data) as ChatChunk;
      } catch {
        throw new ServiceError("BAD_GATEWAY", `The model provider sent an invalid stream frame for ${id}`);
      }
      // A provider may report an error inside the stream; relay it as the last frame.
      if (chunk.error) throw new ServiceError("UPSTREAM", "The model provider reported an error", { status: 502, upstreamBody: chunk });
      if (chunk.choices?.some((choice) => choice.finish_reason)) finished = true;
      yield chunk;
    }
    // A connection that ends before any choice finished was cut off: the client must see a
    // terminated stream, not a [DONE] that passes a truncated answer off as whole.
    if (!finished) throw new ServiceError("BAD_GATEWAY", `The model provider closed the stream early for ${id}`);
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    throw transportError(error, timer, timeoutMs, id, true);
  } finally {
    timer.stop();
  }
}

/** Relays the provider's error body and status as they are, `{detail}` bodies included (spec 7.2). */
async function relayedError(response: Response): Promise<ServiceError> {
  const text = await response.text().catch(() => "");
  let upstreamBody: unknown;
  try {
    upstreamBody = JSON.parse(text);
  } catch {
    upstreamBody = { detail: text || response.statusText || `HTTP ${response.status}` };
  }
  const message =
    (upstreamBody as { error?: { message?: string } })?.error?.message ?? (upstreamBody as { detail?: string })?.detail ?? `HTTP ${response.status}`;
  // Upstream headers (Retry-After included) are not copied: spec 7.2 forwards 429 without it.
  return new ServiceError("UPSTREAM", String(message), { status: response.status, upstreamBody });
}

function transportError(error: unknown, timer: IdleTimer, timeoutMs: number, id: string, midStream = false): ServiceError {
  if (timer.fired) return new ServiceError("TIMEOUT", `The model provider did not answer within ${timeoutMs / 1000}s for ${id}`);
  if (midStream) return new ServiceError("BAD_GATEWAY", `The model provider closed the stream early for ${id}`, { cause: error });
  return new ServiceError("BAD_GATEWAY", `The model provider for ${id} is unreachable`, { cause: error });
}

/** An abort signal that fires when `touch` has not been called for `ms`. */
class IdleTimer {
  readonly #controller = new AbortController();
  readonly #ms: number;
  #handle: NodeJS.Timeout | undefined;
  #stopped = false;
  fired = false;

  constructor(ms: number) {
    this.#ms = ms;
    this.touch();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  touch(): void {
    if (this.fired || this.#stopped) return;
    clearTimeout(this.#handle);
    this.#handle = setTimeout(() => {
      this.fired = true;
      this.#controller.abort(new DOMException("The model provider timed out", "TimeoutError"));
    }, this.#ms);
    this.#handle.unref?.();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#handle);
  }
}
