import { ServiceError } from "../../errors.js";
import type { UpstreamResponse } from "../../outbound/upstream.js";
import { withWireText } from "../../wire-text.js";
import { Translation, applyMatrix, forwardedBody } from "../translate/matrix.js";
import type { ChatChunk, ChatCompletion, ChatRequest, Provider, ProviderResult } from "../types.js";
import type { AzureModelConfig, OpenAiModelConfig } from "../models-config.js";
import { responsesChunks, responsesCompletion, responsesRequest } from "./openai-responses.js";
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
 * Any upstream speaking OpenAI's formats (`openai-compatible`: OpenAI, vLLM, Ollama, Groq,
 * Together, Mistral, DeepSeek, OpenRouter…), and Azure OpenAI (`azure-openai`: chat completions on
 * `<baseURL>/openai/deployments/<deployment>/chat/completions?api-version=…`, the Responses API on
 * `<baseURL>/openai/v1/responses`, the key in `api-key`). A request in an API the upstream serves
 * (`apis`) is forwarded as the client sent it, with only the model id changed and, streaming,
 * `stream_options.include_usage` so usage can be metered; any other is translated to the first
 * API (docs/dialects.md). Upstream errors are relayed verbatim with their status (docs/providers.md).
 */
export class OpenAiCompatibleProvider implements Provider {
  readonly #options: OpenAiProviderOptions;

  constructor(options: OpenAiProviderOptions) {
    this.#options = options;
  }

  async complete(request: ChatRequest, signal: AbortSignal, trace: { traceparent?: string } = {}): Promise<ProviderResult> {
    const { config, id } = this.#options;
    const upstreamModel = config.upstreamModel ?? id;
    const apis = config.apis;
    const source = request.source;
    const native = source && (apis as readonly string[]).includes(source.dialect) ? source.dialect : undefined;
    if (native === "responses" || (!native && apis[0] === "responses")) {
      const t = new Translation("responses", id, config);
      const body = native ? forwardedBody(source!.body, upstreamModel, t) : responsesRequest(request, upstreamModel, t);
      const response = await this.#post("responses", body, request.stream === true, signal, trace);
      const result: ProviderResult = !request.stream
        ? { kind: "completion", completion: responsesCompletion(await this.#json(response), id, native !== undefined) }
        : { kind: "stream", chunks: this.#events(response, signal, responsesChunks(id, native !== undefined)) };
      return t.warnings.length ? { ...result, warnings: t.warnings } : result;
    }
    const t = new Translation("chat", id, config);
    const body = native ? forwardedBody(source!.body, upstreamModel, t) : chatRequest(request, upstreamModel, config.maxTokensField, t);
    // Usage is asked for so the answer is metered on the upstream's count; a Platform request
    // (its six fields only, spec 4.2) asks only when the model's config says so.
    if (request.stream && (!request.sixFields || config.streamUsage))
      body.stream_options = { ...(body.stream_options as object | undefined), include_usage: true };
    const response = await this.#post("chat", body, request.stream === true, signal, trace);
    const result: ProviderResult = !request.stream
      ? { kind: "completion", completion: await this.#json<ChatCompletion>(response) }
      : { kind: "stream", chunks: this.#events(response, signal, parseChunks(id)) };
    return t.warnings.length ? { ...result, warnings: t.warnings } : result;
  }

  async #post(
    api: "chat" | "responses",
    body: Record<string, unknown>,
    stream: boolean,
    signal: AbortSignal,
    trace: { traceparent?: string },
  ) {
    const { config, id, env } = this.#options;
    const apiKey = apiKeyOf(config.apiKeyEnv, env, id);
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: stream ? "text/event-stream" : "application/json",
    };
    const base = trimSlash(config.baseURL);
    let url: string;
    if (config.provider === "azure-openai") {
      const deployment = encodeURIComponent(config.upstreamModel ?? id);
      url =
        api === "chat"
          ? `${base}/openai/deployments/${deployment}/chat/completions?api-version=${encodeURIComponent(config.apiVersion)}`
          : `${base}/openai/v1/responses`;
      if (apiKey) headers["api-key"] = apiKey;
    } else {
      url = `${base}/${api === "chat" ? "chat/completions" : "responses"}`;
      if (apiKey) headers.authorization = `Bearer ${apiKey}`;
    }
    return post({ id, url, headers, body: JSON.stringify(body), signal, timeoutMs: this.#timeoutMs(), traceparent: trace.traceparent });
  }

  #timeoutMs(): number {
    return (this.#options.config.timeoutSeconds ?? this.#options.timeoutSeconds) * 1000;
  }

  async #json<T extends object>(response: UpstreamResponse): Promise<T> {
    const answer = await readJson<T>(response, this.#timeoutMs(), this.#options.id);
    if (!answer || typeof answer !== "object") throw invalidAnswer(this.#options.id);
    return answer;
  }

  #events(response: UpstreamResponse, signal: AbortSignal, handlers: UpstreamEventHandlers) {
    return upstreamEvents(response.body, this.#timeoutMs(), this.#options.id, signal, handlers);
  }
}

/**
 * The canonical request as a chat completions body (docs/dialects.md "The matrix", column
 * chat): the fields it types, the chat fields it kept in `extra`, nothing the matrix drops. An
 * empty tool list is an error upstream, so it is left out, and the tool fields with it.
 */
export function chatRequest(
  request: ChatRequest,
  model: string,
  maxTokensField: "max_tokens" | "max_completion_tokens",
  t: Translation,
): Record<string, unknown> {
  const r = applyMatrix(request, t);
  const body: Record<string, unknown> = { ...r.extra, model };
  // Reasoning text of earlier turns is the answering model's own: some upstreams refuse it as input.
  body.messages = r.messages.map(({ reasoning_content: _reasoning, ...message }) => message);
  if (r.stream !== undefined) body.stream = r.stream;
  if (r.max_tokens !== undefined) body[maxTokensField] = r.max_tokens;
  for (const field of FORWARDED) if (r[field] !== undefined) body[field] = r[field];
  if (r.tools?.length) {
    body.tools = r.tools;
    if (r.tool_choice !== undefined) body.tool_choice = r.tool_choice;
    if (r.parallel_tool_calls !== undefined) body.parallel_tool_calls = r.parallel_tool_calls;
  }
  return body;
}

/** Canonical fields that are chat fields of the same name. */
const FORWARDED = [
  "temperature",
  "top_p",
  "stop",
  "response_format",
  "seed",
  "n",
  "logprobs",
  "top_logprobs",
  "presence_penalty",
  "frequency_penalty",
  "user",
  "metadata",
  "reasoning_effort",
] as const;

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
