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
  /** An assistant turn's reasoning text, as reasoning models of the chat format send it back. */
  reasoning_content?: string;
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

/** The client dialects of the chat domain (docs/dialects.md): chat completions, OpenAI Responses, Anthropic Messages. */
export type ChatDialect = "chat" | "responses" | "messages";

/** Structured output as the chat wire format has it (`response_format`); docs/dialects.md "Structured output". */
export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | {
      type: "json_schema";
      json_schema: { name: string; schema?: Record<string, unknown>; strict?: boolean | null; description?: string };
    };

/** How hard a reasoning model thinks (chat `reasoning_effort`, Responses `reasoning.effort`, Messages `output_config.effort`). */
export type ReasoningEffort = "none" | "minimal" | "low" | "medium" | "high" | "xhigh" | "max";

/**
 * The client's request as it came, for an upstream that speaks its dialect: forwarded with only
 * the model id and what the gateway must set changed, so a field a provider adds works the day it
 * ships (docs/dialects.md "Same dialect: forwarded").
 */
export interface SourceRequest {
  dialect: ChatDialect;
  body: Readonly<Record<string, unknown>>;
  /** Request headers a same-dialect upstream needs (`anthropic-beta`, `anthropic-version`). */
  headers?: Readonly<Record<string, string>>;
  /** The query a same-dialect upstream gets with it (the Anthropic SDK's `beta=true`). */
  query?: string;
  /**
   * Fields of the request that have no place in the canonical request: forwarded to a
   * same-dialect upstream, dropped with an `X-Service-Warning` anywhere else.
   */
  untranslated: readonly string[];
  /**
   * Tools the canonical request leaves out (server tools the gateway does not run, tool types
   * with no canonical form), by path and type: forwarded to a same-dialect upstream, dropped with
   * a warning elsewhere.
   */
  serverTools: readonly { path: string; type: string }[];
  /**
   * Parts of the request the canonical request cannot hold (a block type, a role, a source it
   * has no form for): forwarded to a same-dialect upstream, 400 naming them anywhere else.
   */
  unreadable?: readonly { path: string; message: string }[];
}

/**
 * The canonical request inside the chat domain: the chat wire format (docs/interface.md 2.2). The
 * Platform API forwards its six fields only; the Account and Gateway surfaces carry every field
 * their dialect has (rpc/chat/dialects/). Every adapter (rpc/chat/providers/, docs/providers.md)
 * translates this shape to its provider, field by field as docs/dialects.md's matrix says, and
 * the answer back to `ChatCompletion` / `ChatChunk`; an adapter of the client's own dialect
 * forwards `source` instead.
 */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  temperature?: number;
  top_p?: number;
  /** The most completion tokens (chat `max_tokens` or `max_completion_tokens`, Responses `max_output_tokens`). */
  max_tokens?: number;
  /** Functions the model may call (agent runs, and the surfaces that carry tool calls). */
  tools?: ToolSpec[];
  tool_choice?: ToolChoice;
  parallel_tool_calls?: boolean;
  /** Up to 4 sequences where the model stops. */
  stop?: string | string[];
  response_format?: ResponseFormat;
  seed?: number;
  /** Choices to generate (chat only). */
  n?: number;
  logprobs?: boolean;
  top_logprobs?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  /** Sampling from the top K tokens (Messages `top_k`; Gemini, Bedrock's Anthropic models). */
  top_k?: number;
  /** An end-user id for the provider's abuse monitoring (Messages `metadata.user_id`). */
  user?: string;
  metadata?: Record<string, string>;
  reasoning_effort?: ReasoningEffort;
  /** A thinking budget in tokens, when the client gave one (Messages `thinking.budget_tokens`). */
  reasoning_budget?: number;
  /**
   * Fields of a chat completions body the gateway does not model: sent as they are to an
   * upstream of the chat format, dropped with a warning elsewhere (docs/dialects.md).
   */
  extra?: Record<string, unknown>;
  /** The client's own request, when an upstream of its dialect can take it as it is. */
  source?: SourceRequest;
  /**
   * The Platform API's request: exactly its six fields reach the model (spec 4.2), nothing the
   * gateway would add for its own sake (`stream_options`), unless the model's config asks.
   */
  sixFields?: true;
}

import type { Usage as MeteredUsage } from "../money/types.js";

/**
 * Token usage as the chat format reports it: what is metered (rpc/money/types.ts) and the
 * details providers give, carried across dialects (cached prompt tokens, reasoning tokens).
 */
export interface Usage extends MeteredUsage {
  prompt_tokens_details?: { cached_tokens?: number; cache_creation_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
}

/** Why a choice ended; adapters map their provider's reasons onto these. */
export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | (string & {});

/** A `chat.completion.chunk` frame as the wire format has it; other fields pass through. */
export interface ChatChunk {
  id?: string;
  object?: string;
  model?: string;
  choices?: {
    index?: number;
    delta?: { role?: string; content?: string | null; reasoning_content?: string; tool_calls?: ToolCallDelta[] };
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
    message: { role: string; content: string | null; reasoning_content?: string; tool_calls?: ToolCall[] };
    finish_reason: FinishReason | null;
  }[];
  usage?: Usage;
  [field: string]: unknown;
}

/**
 * What a provider answers: a whole completion, or chunks as they arrive; with `warnings`, what
 * the translation to this provider left out (sent to the client as `X-Service-Warning`).
 */
export type ProviderResult = ({ kind: "completion"; completion: ChatCompletion } | { kind: "stream"; chunks: AsyncIterable<ChatChunk> }) & {
  warnings?: readonly string[];
};

export interface Provider {
  /**
   * Runs one request. Errors before the first byte are thrown (so the caller answers with a
   * status); errors after it surface from the iterator. `signal` aborts the upstream call.
   * Upstream adapters throw `ProviderError` (rpc/chat/providers/provider-error.ts): the
   * upstream's status, its `Retry-After`, and whether another attempt may succeed.
   */
  complete(request: ChatRequest, signal: AbortSignal, trace?: { traceparent?: string }): Promise<ProviderResult>;
}
