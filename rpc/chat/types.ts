/** One message of a chat request (spec 2.2). Content parts are passed through as given. */
export interface ChatMessage {
  role: string;
  content: string | readonly Record<string, unknown>[] | null;
  /** Agent runs only (rpc/agents/run.ts): the tool calls of an assistant turn. */
  tool_calls?: ToolCall[];
  /** Agent runs only: the call a `tool` message answers. */
  tool_call_id?: string;
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
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** A streamed fragment of a tool call: assembled by `index` across chunks. */
export interface ToolCallDelta {
  index?: number;
  id?: string;
  type?: "function";
  function?: { name?: string; arguments?: string };
}

/** The six fields forwarded to a model (spec 2.2); nothing else ever reaches a provider. */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  /**
   * Set only by the agent runner (rpc/agents/invoke.ts); the customer chat surfaces never
   * forward it, so the six fields above stay the only ones a chat request can carry.
   */
  tools?: ToolSpec[];
}

export type { Usage } from "../money/types.js";
import type { Usage } from "../money/types.js";

/** A `chat.completion.chunk` frame as the wire format has it; other fields pass through. */
export interface ChatChunk {
  id?: string;
  object?: string;
  model?: string;
  choices?: { index?: number; delta?: { role?: string; content?: string | null; tool_calls?: ToolCallDelta[] }; finish_reason?: string | null }[];
  usage?: Usage | null;
  [field: string]: unknown;
}

/** A `chat.completion` object (spec 2.3). */
export interface ChatCompletion {
  id: string;
  object: string;
  model: string;
  choices: { index?: number; message: { role: string; content: string | null; tool_calls?: ToolCall[] }; finish_reason: string | null }[];
  usage?: Usage;
  [field: string]: unknown;
}

/** What a provider answers: a whole completion, or chunks as they arrive. */
export type ProviderResult =
  | { kind: "completion"; completion: ChatCompletion }
  | { kind: "stream"; chunks: AsyncIterable<ChatChunk> };

export interface Provider {
  /**
   * Runs one request. Errors before the first byte are thrown (so the caller answers with a
   * status); errors after it surface from the iterator. `signal` aborts the upstream call.
   */
  complete(request: ChatRequest, signal: AbortSignal, trace?: { traceparent?: string }): Promise<ProviderResult>;
}
