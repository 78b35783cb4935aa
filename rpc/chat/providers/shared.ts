import { ServiceError } from "../../errors.js";
import { addSecret } from "../../outbound/secrets.js";
import { readFrames, readSseEvents, type FrameEventOptions, type Framing, type SseEventOptions } from "../../sse-parse.js";
import { isUpstreamTimeout, upstreamRequest, type UpstreamResponse } from "../../outbound/upstream.js";
import type { ChatChunk, ChatMessage, ChatRequest, ContentPart, FinishReason, ToolCallDelta, ToolSpec, Usage } from "../types.js";
import { isRetryableStatus, messageOf, ProviderError, retryAfterOf, retryDelayOf } from "./provider-error.js";

/**
 * What the upstream adapters share (docs/providers.md): one POST through the pooled client
 * with the provider's errors mapped the same way, a guard around streams, the
 * `chat.completion.chunk` frames they build, and the small translations every format needs.
 */

export interface PostOptions {
  /** The model id, for messages. */
  id: string;
  url: string;
  headers: Record<string, string>;
  body: string | Buffer;
  signal: AbortSignal;
  timeoutMs: number;
  /** W3C Trace Context of the caller, sent on as `traceparent`. */
  traceparent?: string;
}

/**
 * One POST on the pooled client (rpc/outbound/upstream.ts): the timeout covers the wait for
 * the first byte and then each gap between chunks; the caller's signal cancels the request.
 * A non-2xx answer is thrown as the provider's error relayed verbatim (docs/interface.md 7.2).
 */
export async function post(options: PostOptions): Promise<UpstreamResponse> {
  const headers = { ...options.headers };
  // W3C Trace Context: the caller's trace continues at the provider.
  if (options.traceparent) headers.traceparent = options.traceparent;
  let response: UpstreamResponse;
  try {
    response = await upstreamRequest(options.url, {
      method: "POST",
      headers,
      body: options.body,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  } catch (error) {
    throw transportError(error, options.timeoutMs, options.id);
  }
  if (response.statusCode >= 200 && response.statusCode <= 299) return response;
  throw await relayedError(response, options.timeoutMs, options.id);
}

/** Relays the provider's error body and status as they are, `{detail}` bodies included (docs/interface.md 7.2). */
export async function relayedError(response: UpstreamResponse, timeoutMs: number, id: string): Promise<ServiceError> {
  let text: string;
  try {
    text = await response.body.text();
  } catch (error) {
    if (!response.body.destroyed) response.body.destroy();
    return transportError(error, timeoutMs, id);
  }
  let upstreamBody: unknown;
  try {
    upstreamBody = JSON.parse(text);
  } catch {
    upstreamBody = { detail: text || `HTTP ${response.statusCode}` };
  }
  const status = response.statusCode;
  return new ProviderError("UPSTREAM", messageOf(upstreamBody, status), {
    status,
    upstreamBody,
    upstreamStatus: status,
    retryable: isRetryableStatus(status),
    retryAfterMs: retryAfterOf(response.headers) ?? retryDelayOf(upstreamBody),
  });
}

/** A body read whole and parsed; an unreadable one is the provider's fault (502, retryable). */
export async function readJson<T>(response: UpstreamResponse, timeoutMs: number, id: string): Promise<T> {
  let text: string;
  try {
    text = await response.body.text();
  } catch (error) {
    if (!response.body.destroyed) response.body.destroy();
    throw transportError(error, timeoutMs, id);
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    throw invalidAnswer(id);
  }
}

export function invalidAnswer(id: string): ProviderError {
  return new ProviderError("BAD_GATEWAY", `The model provider sent an invalid response for ${id}`, { retryable: true });
}

/** The cut stream's error: the client's stream ends with an error frame and no [DONE]. */
export function streamCut(id: string, cause?: unknown): ServiceError {
  return new ServiceError("BAD_GATEWAY", `The model provider closed the stream early for ${id}`, cause === undefined ? {} : { cause });
}

export function transportError(error: unknown, timeoutMs: number, id: string, midStream = false): ServiceError {
  if (error instanceof ServiceError) return error;
  if (isUpstreamTimeout(error)) {
    const message = `The model provider did not answer within ${timeoutMs / 1000}s for ${id}`;
    return midStream ? new ServiceError("TIMEOUT", message) : new ProviderError("TIMEOUT", message, { retryable: true, cause: error });
  }
  if (midStream) return streamCut(id, error);
  return new ProviderError("BAD_GATEWAY", `The model provider for ${id} is unreachable`, { retryable: true, cause: error });
}

/** What an adapter's SSE stream makes of the upstream's events (rpc/sse-parse.ts `readSseEvents`). */
export type UpstreamEventHandlers = Pick<SseEventOptions<ChatChunk>, "event" | "end" | "endAtDone">;

/** What an adapter's stream of another framing makes of its frames (rpc/sse-parse.ts `readFrames`). */
export type UpstreamFrameHandlers<F> = Pick<FrameEventOptions<F, ChatChunk>, "event" | "end">;

/**
 * An upstream's server-sent events as chunks, made as the bytes arrive (rpc/sse-parse.ts
 * `readSseEvents`): the call's signal ends a pending read, anything other than a ServiceError
 * is a transport failure (a timeout, a cut), and a stream stopped early closes the body and so
 * its connection.
 */
export function upstreamEvents(
  body: UpstreamResponse["body"],
  timeoutMs: number,
  id: string,
  signal: AbortSignal,
  handlers: UpstreamEventHandlers,
): AsyncIterableIterator<ChatChunk> {
  return readSseEvents<ChatChunk>(body, { ...handlers, signal, mapError: midStream(timeoutMs, id) });
}

/** `upstreamEvents` for a stream of another framing (rpc/sse-parse.ts `readFrames`: Bedrock's binary event stream). */
export function upstreamFrames<F>(
  body: UpstreamResponse["body"],
  framing: Framing<F>,
  timeoutMs: number,
  id: string,
  signal: AbortSignal,
  handlers: UpstreamFrameHandlers<F>,
): AsyncIterableIterator<ChatChunk> {
  return readFrames<F, ChatChunk>(body, framing, { ...handlers, signal, mapError: midStream(timeoutMs, id) });
}

/** The error a stream's consumer sees: a ServiceError as it is, anything else a transport failure mid-stream. */
function midStream(timeoutMs: number, id: string): (error: unknown) => unknown {
  return (error) => transportError(error, timeoutMs, id, true);
}

/** Builds the `chat.completion.chunk` frames of one streamed answer. */
export class ChunkFrames {
  readonly #base: { id: string; object: "chat.completion.chunk"; created: number; model: string };

  constructor(id: string, model: string, created = Math.floor(Date.now() / 1000)) {
    this.#base = { id, object: "chat.completion.chunk", created, model };
  }

  delta(
    delta: { role?: string; content?: string | null; reasoning_content?: string; tool_calls?: ToolCallDelta[] },
    finishReason: FinishReason | null = null,
  ): ChatChunk {
    return { ...this.#base, choices: [{ index: 0, delta, finish_reason: finishReason }], usage: null };
  }

  /** The last frame, as openai-compatible providers send it with `stream_options.include_usage`. */
  usage(usage: Usage): ChatChunk {
    return { ...this.#base, choices: [], usage };
  }
}

export function usageFrom(prompt: number, completion: number): Usage {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The environment key a model names, or 503 when it is unset (docs/models-and-chat.md). */
export function apiKeyOf(apiKeyEnv: string | undefined, env: Record<string, string | undefined>, id: string): string | undefined {
  if (!apiKeyEnv) return undefined;
  const key = env[apiKeyEnv];
  if (!key)
    throw new ProviderError("UNAVAILABLE", `Chat service not configured: model ${id} has no upstream key`, {
      retryable: false,
      operatorNote: { model: id, unsetVariable: apiKeyEnv },
    });
  // An upstream that echoes the key in an error must not show it to the client (rpc/outbound/secrets.ts).
  addSecret(key);
  return key;
}

export function trimSlash(url: string): string {
  return url.replace(/\/+$/, "");
}

/** The text of a message's content (parts other than text are left out). */
export function textOf(content: ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!content) return "";
  return content.map((part) => (typeof part.text === "string" ? part.text : "")).join("");
}

/** `{type: "image_url", image_url: {url}}` → the URL, or undefined for any other part. */
export function imageUrlOf(part: ContentPart): string | undefined {
  if (part.type !== "image_url") return undefined;
  const image = part.image_url as { url?: unknown } | string | undefined;
  const url = typeof image === "string" ? image : image?.url;
  return typeof url === "string" ? url : undefined;
}

/** A `{type: "file", file: {file_data}}` part's data URL (a PDF, mostly) split, or undefined for any other part. */
export function fileDataOf(part: ContentPart): { mediaType: string; data: string; filename?: string } | undefined {
  if (part.type !== "file") return undefined;
  const file = part.file as { file_data?: unknown; filename?: unknown } | undefined;
  const data = typeof file?.file_data === "string" ? parseDataUrl(file.file_data) : undefined;
  if (!data) return undefined;
  return typeof file?.filename === "string" ? { ...data, filename: file.filename } : data;
}

/** A `data:<media type>;base64,<data>` URL split, or undefined for any other URL. */
export function parseDataUrl(url: string): { mediaType: string; data: string } | undefined {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  return match ? { mediaType: match[1]!, data: match[2]! } : undefined;
}

/** Tool call arguments (a JSON string) as the object the native formats want. */
export function argumentsObject(text: string): Record<string, unknown> {
  if (!text.trim()) return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    return { value: parsed };
  } catch {
    return { arguments: text };
  }
}

/** Names of the functions called, by call id: a `tool` message names only its call. */
export function toolNamesById(messages: readonly ChatMessage[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const message of messages) for (const call of message.tool_calls ?? []) names.set(call.id, call.function.name);
  return names;
}

/**
 * The tools a request declares, or, when it declares none but its history holds tool calls or
 * results, the functions that history names, each with an open schema: Anthropic and Bedrock
 * refuse tool blocks in a request without tools (docs/providers.md "Tool calls"). The second
 * value says the list was read from the history, so the adapter can forbid a new call.
 */
export function declaredTools(request: Pick<ChatRequest, "tools" | "messages">): { tools: ToolSpec[]; fromHistory: boolean } {
  if (request.tools?.length) return { tools: request.tools, fromHistory: false };
  const names = new Set<string>();
  let results = false;
  for (const message of request.messages) {
    for (const call of message.tool_calls ?? []) names.add(call.function.name);
    if (message.role === "tool") results = true;
  }
  if (!names.size && !results) return { tools: [], fromHistory: false };
  // Results whose calls are not in the history still need one declared tool.
  if (!names.size) names.add("tool");
  const tools: ToolSpec[] = [...names].map((name) => ({
    type: "function",
    function: { name, description: "Declared by the gateway for the conversation's earlier calls.", parameters: { type: "object" } },
  }));
  return { tools, fromHistory: true };
}

/** `system` and `developer` messages: the instructions the native formats carry apart. */
export function isSystem(message: ChatMessage): boolean {
  return message.role === "system" || message.role === "developer";
}

/** The stop sequences of a request as a list (the chat format also takes one string). */
export function stopList(stop: string | string[] | undefined): string[] | undefined {
  if (stop === undefined) return undefined;
  const list = typeof stop === "string" ? [stop] : stop;
  return list.length ? list : undefined;
}

/**
 * The completion tokens to ask for when a provider requires a cap (Anthropic): the request's
 * `max_tokens`, else the model's `maxOutputTokens` (default 4096) within what the context
 * window leaves after the prompt, the same cap a hold reserves (docs/models-and-chat.md "Holds").
 */
export function outputCapOf(
  maxTokens: number | undefined,
  config: { maxOutputTokens?: number; contextWindow: number },
  promptTokens: number,
): number {
  if (maxTokens !== undefined) return maxTokens;
  return Math.max(1, Math.min(config.maxOutputTokens ?? 4096, config.contextWindow - promptTokens));
}
