/**
 * One content part of a message (chat wire format): text, or an image by URL (`data:` URLs
 * included). Adapters translate the two kinds; any other part is passed as given where the
 * provider speaks this format and dropped where it does not (docs/providers.md).
 */
export type ContentPart = Readonly<Record<string, unknown>>;
// Known kinds: `{type: "text", text}` and `{type: "image_url", image_url: {url, detail?}}`.

/** One message of a chat request (docs/interface.md 2.2). Content parts are passed through as given. */
export interface ChatMessage {
  /** `system`, `user`, `assistant` or `tool` (`developer` is read as `system`). */
  role: string;
  content: string | readonly ContentPart[] | null;
  /** The tool calls of an assistant turn. */
  tool_calls?: ToolCall[];
  /** The call a `tool` message answers. */
  tool_call_id?: string;
  /** A participant name, or (legacy) the function a `tool` message answers. */
  name?: string;
}

/** A function call the model asked for (chat wire format). */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A tool offered to the model as a function (chat wire format). */
export interface ToolSpec {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean | null };
}

/** Which tool the model must (or must not) call: the chat wire format's `tool_choice`. */
export type ToolChoice = "auto" | "none" | "required" | { type: "function"; function: { name: string } };

/** A streamed fragment of a tool call: assembled by `index` across chunks. */
export interface ToolCallDelta {
  index?: number;
  id?: string;
  type?: "function";
  function?: { name?: string; arguments?: string };
}

/**
 * The canonical request inside the chat domain: the chat wire format (docs/interface.md 2.2). The Platform
 * API forwards its six fields only; the Account and Gateway surfaces and agent runs may add the
 * tool fields and `stop`. Every adapter (rpc/chat/providers/, docs/providers.md) translates
 * this shape to its provider and the answer back to `ChatCompletion` / `ChatChunk`.
 */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  /** Functions the model may call (agent runs, and the surfaces that carry tool calls). */
  tools?: ToolSpec[];
  tool_choice?: ToolChoice;
  parallel_tool_calls?: boolean;
  /** Up to 4 sequences where the model stops. */
  stop?: string | string[];
}

export type { Usage } from "../money/types.js";
import type { Usage } from "../money/types.js";

/** Why a choice ended; adapters map their provider's reasons onto these. */
export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | (string & {});

/** A `chat.completion.chunk` frame as the wire format has it; other fields pass through. */
export interface ChatChunk {
  id?: string;
  object?: string;
  model?: string;
  choices?: {
    index?: number;
    delta?: { role?: string; content?: string | null; tool_calls?: ToolCallDelta[] };
    finish_reason?: FinishReason | null;
  }[];
  usage?: Usage | null;
  [field: string]: unknown;
}

/** A `chat.completion` object (docs/interface.md 2.3). */
export interface ChatCompletion {
  id: string;
  object: string;
  model: string;
  choices: {
    index?: number;
    message: { role: string; content: string | null; tool_calls?: ToolCall[] };
    finish_reason: FinishReason | null;
  }[];
  usage?: Usage;
  [field: string]: unknown;
}

/** What a provider answers: a whole completion, or chunks as they arrive. */
export type ProviderResult = { kind: "completion"; completion: ChatCompletion } | { kind: "stream"; chunks: AsyncIterable<ChatChunk> };

export interface Provider {
  /**
   * Runs one request. Errors before the first byte are thrown (so the caller answers with a
   * status); errors after it surface from the iterator. `signal` aborts the upstream call.
   * Upstream adapters throw `ProviderError` (rpc/chat/providers/provider-error.ts): the
   * upstream's status, its `Retry-After`, and whether another attempt may succeed.
   */
  complete(request: ChatRequest, signal: AbortSignal, trace?: { traceparent?: string }): Promise<ProviderResult>;
}
