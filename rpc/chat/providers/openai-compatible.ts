import { ServiceError } from "../../errors.js";
import { withWireText } from "../../wire-text.js";
import type { ChatChunk, ChatCompletion, ChatRequest, Provider, ProviderResult } from "../types.js";
import type { AzureModelConfig, OpenAiModelConfig } from "../models-config.js";
import { ProviderError, isRetryableStatus, messageOf } from "./provider-error.js";
import { apiKeyOf, invalidAnswer, post, readJson, streamCut, trimSlash, upstreamEvents, type UpstreamEventHandlers } from "./shared.js";

export interface OpenAiProviderOptions {
  id: string;
  config: OpenAiModelConfig | AzureModelConfig;
  /** MODEL_TIMEOUT_SECONDS unless the model sets its own. */
  timeoutSeconds: number;
  env: Record<string, string | undefined>;
}

/**
 * Any upstream speaking the chat completions wire format (`openai-compatible`: OpenAI, vLLM,
 * Ollama, Groq, Together, Mistral, DeepSeek, OpenRouter…), and Azure OpenAI (`azure-openai`:
 * the same format on `<baseURL>/openai/deployments/<deployment>/chat/completions?api-version=…`
 * with the key in `api-key`). The canonical request is this format, so it is sent as it is,
 * plus `stream_options.include_usage` when streaming so usage can be metered (docs/interface.md 7.2,
 * issue 3). Upstream errors are relayed verbatim with their status (docs/providers.md).
 */
export class OpenAiCompatibleProvider implements Provider {
  readonly #options: OpenAiProviderOptions;

  constructor(options: OpenAiProviderOptions) {
    this.#options = options;
  }

  async complete(request: ChatRequest, signal: AbortSignal, trace: { traceparent?: string } = {}): Promise<ProviderResult> {
    const { config, id, env } = this.#options;
    const timeoutMs = (config.timeoutSeconds ?? this.#options.timeoutSeconds) * 1000;
    const apiKey = apiKeyOf(config.apiKeyEnv, env, id);
    const upstreamModel = config.upstreamModel ?? id;
    const body: Record<string, unknown> = { ...request, model: upstreamModel };
    if (request.stream) body.stream_options = { include_usage: true };
    // An empty tool list is an error upstream, so it is left out, and the tool fields with it.
    if (!request.tools?.length) {
      delete body.tools;
      delete body.tool_choice;
      delete body.parallel_tool_calls;
    }

    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: request.stream ? "text/event-stream" : "application/json",
    };
    let url: string;
    if (config.provider === "azure-openai") {
      url = `${trimSlash(config.baseURL)}/openai/deployments/${encodeURIComponent(upstreamModel)}/chat/completions?api-version=${encodeURIComponent(config.apiVersion)}`;
      if (apiKey) headers["api-key"] = apiKey;
    } else {
      url = `${trimSlash(config.baseURL)}/chat/completions`;
      if (apiKey) headers.authorization = `Bearer ${apiKey}`;
    }
    const response = await post({ id, url, headers, body: JSON.stringify(body), signal, timeoutMs, traceparent: trace.traceparent });
    if (!request.stream) {
      const completion = await readJson<ChatCompletion>(response, timeoutMs, id);
      if (!completion || typeof completion !== "object") throw invalidAnswer(id);
      return { kind: "completion", completion };
    }
    return { kind: "stream", chunks: upstreamEvents(response.body, timeoutMs, id, signal, parseChunks(id)) };
  }
}

/**
 * The upstream's frames as chunks, parsed as the bytes arrive (shared.ts `upstreamEvents`: no
 * generator or promise per frame between the socket and the relay).
 */
function parseChunks(id: string): UpstreamEventHandlers {
  let finished = false;
  return {
    endAtDone: true,
    event(data, push) {
      let chunk: ChatChunk;
      try {
        chunk = JSON.parse(data) as ChatChunk;
      } catch {
        throw new ServiceError("BAD_GATEWAY", `The model provider sent an invalid stream frame for ${id}`);
      }
      // A provider may report an error inside the stream; relay it as the last frame.
      if (chunk.error) throw inStreamError(chunk);
      const answer = ofTheAnswer(chunk);
      if (!answer) return;
      if (answer.choices?.some((choice) => choice.finish_reason)) finished = true;
      // A frame relayed as it came keeps its text, so the relay need not serialise it again.
      push(answer === chunk ? withWireText(chunk, data) : answer);
    },
    // A connection that ends before any choice finished was cut off: the client must see a
    // terminated stream, not a [DONE] that passes a truncated answer off as whole.
    end() {
      if (!finished) throw streamCut(id);
    },
  };
}

/**
 * The chunk as far as it carries the answer, or undefined when it carries none of it. Azure
 * OpenAI's content filtering sends chunks of its own: a first one with no choices and only
 * `prompt_filter_results` (its `id`, `object` and `model` empty), and with asynchronous
 * filtering, annotations whose choice has no `delta`. Relayed, they would give clients a
 * frame of another shape (and, as the first chunk, count as the answer having started); they
 * are left out. A chunk with `choices: []` and `usage` is the usage frame, kept.
 */
function ofTheAnswer(chunk: ChatChunk): ChatChunk | undefined {
  if (!Array.isArray(chunk.choices)) return chunk;
  if (chunk.choices.every((choice) => choice?.delta)) return chunk.choices.length || chunk.usage ? chunk : undefined;
  const choices = chunk.choices
    .filter((choice) => choice?.delta || choice?.finish_reason)
    .map((choice) => (choice.delta ? choice : { ...choice, delta: {} }));
  return choices.length || chunk.usage ? { ...chunk, choices } : undefined;
}

/** An error frame inside a stream (`{"error": {…}}`): relayed as the last frame, status 502. */
function inStreamError(chunk: ChatChunk): ProviderError {
  const code = Number((chunk.error as { code?: unknown })?.code);
  return new ProviderError("UPSTREAM", messageOf(chunk, 502), {
    status: 502,
    upstreamBody: chunk,
    retryable: Number.isInteger(code) ? isRetryableStatus(code) : true,
  });
}
