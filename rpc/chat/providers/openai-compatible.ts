import { ServiceError } from "../../errors.js";
import { readSseData } from "../../sse-parse.js";
import { isUpstreamTimeout, upstreamRequest, type UpstreamResponse } from "../../outbound/upstream.js";
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

    // The pooled client (rpc/outbound/upstream.ts): the timeout covers the wait for the first
    // byte and then each gap between chunks; the caller's signal cancels the upstream request.
    const url = config.baseURL.replace(/\/+$/, "") + "/chat/completions";
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: request.stream ? "text/event-stream" : "application/json",
    };
    if (apiKey) headers.authorization = `Bearer ${apiKey}`;
    // W3C Trace Context: the caller's trace continues at the provider.
    if (trace.traceparent) headers.traceparent = trace.traceparent;
    let response: UpstreamResponse;
    try {
      response = await upstreamRequest(url, { method: "POST", headers, body: JSON.stringify(body), signal, timeoutMs });
    } catch (error) {
      throw transportError(error, timeoutMs, id);
    }
    try {
      if (response.statusCode < 200 || response.statusCode > 299) throw await relayedError(response);
      if (!request.stream) {
        const text = await response.body.text();
        let completion: ChatCompletion;
        try {
          completion = JSON.parse(text) as ChatCompletion;
        } catch {
          throw new ServiceError("BAD_GATEWAY", `The model provider sent an invalid response for ${id}`);
        }
        return { kind: "completion", completion };
      }
      return { kind: "stream", chunks: parseChunks(response.body, timeoutMs, id, signal) };
    } catch (error) {
      if (!response.body.destroyed) response.body.destroy();
      if (error instanceof ServiceError) throw error;
      throw transportError(error, timeoutMs, id);
    }
  }
}

async function* parseChunks(body: UpstreamResponse["body"], timeoutMs: number, id: string, signal: AbortSignal): AsyncGenerator<ChatChunk> {
  let finished = false;
  try {
    for await (const data of readSseData(body, { signal, endAtDone: true })) {
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
    throw transportError(error, timeoutMs, id, true);
  } finally {
    if (!finished && !body.destroyed) body.destroy();
  }
}

/** Relays the provider's error body and status as they are, `{detail}` bodies included (spec 7.2). */
async function relayedError(response: UpstreamResponse): Promise<ServiceError> {
  const text = await response.body.text().catch(() => "");
  let upstreamBody: unknown;
  try {
    upstreamBody = JSON.parse(text);
  } catch {
    upstreamBody = { detail: text || `HTTP ${response.statusCode}` };
  }
  const message =
    (upstreamBody as { error?: { message?: string } })?.error?.message ?? (upstreamBody as { detail?: string })?.detail ?? `HTTP ${response.statusCode}`;
  // Upstream headers (Retry-After included) are not copied: spec 7.2 forwards 429 without it.
  return new ServiceError("UPSTREAM", String(message), { status: response.statusCode, upstreamBody });
}

function transportError(error: unknown, timeoutMs: number, id: string, midStream = false): ServiceError {
  if (isUpstreamTimeout(error)) return new ServiceError("TIMEOUT", `The model provider did not answer within ${timeoutMs / 1000}s for ${id}`);
  if (midStream) return new ServiceError("BAD_GATEWAY", `The model provider closed the stream early for ${id}`, { cause: error });
  return new ServiceError("BAD_GATEWAY", `The model provider for ${id} is unreachable`, { cause: error });
}
