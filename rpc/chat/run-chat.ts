import * as v from "valibot";
import type { RoutedModel } from "./model-router.js";
import { countPromptTokens, countTokens, usageOf } from "./tokens.js";
import { observeChat } from "./observe-chat.js";
import type { ChatChunk, ChatCompletion, ChatRequest, Usage } from "./types.js";
import type { ChatContext } from "./deps.js";

const Message = v.object({
  role: v.pipe(v.string("messages[].role must be a string"), v.minLength(1, "messages[].role is required")),
  content: v.nullable(
    v.union([v.string(), v.array(v.record(v.string(), v.unknown()))], "messages[].content must be a string or an array of content parts"),
  ),
});

/**
 * A chat request body (spec 2.2). Only the six fields, plus `stream_options` (which decides
 * whether the client sees the usage chunk), survive parsing; everything else a client sends
 * (tools, n, seed, response_format, …) is dropped without error (spec 4.2).
 */
export const ChatBody = v.pipe(
  v.object({
    model: v.optional(v.pipe(v.string("model must be a string"), v.minLength(1, "model must not be empty"))),
    messages: v.optional(v.pipe(v.array(Message, "messages must be an array of {role, content}"), v.minLength(1, "messages must not be empty"))),
    stream: v.nullish(v.boolean("stream must be a boolean")),
    temperature: v.nullish(v.pipe(v.number("temperature must be a number"), v.minValue(0), v.maxValue(2))),
    top_p: v.nullish(v.pipe(v.number("top_p must be a number"), v.minValue(0), v.maxValue(1))),
    max_tokens: v.nullish(v.pipe(v.number("max_tokens must be an integer"), v.integer("max_tokens must be an integer"), v.minValue(1))),
    stream_options: v.nullish(v.object({ include_usage: v.nullish(v.boolean("stream_options.include_usage must be a boolean")) })),
  }),
  // spec 7.2: one message saying both are required, whichever is missing.
  v.check((body) => body.model !== undefined && body.messages !== undefined, "Both model and messages are required"),
);

export type ChatBodyInput = v.InferOutput<typeof ChatBody>;

/** The six forwarded fields, without nulls (spec 2.2: omitted means the model's default). */
export function toChatRequest(body: ChatBodyInput): ChatRequest {
  const request: ChatRequest = { model: body.model!, messages: body.messages!.map(({ role, content }) => ({ role, content })) };
  if (body.stream != null) request.stream = body.stream;
  if (body.temperature != null) request.temperature = body.temperature;
  if (body.top_p != null) request.top_p = body.top_p;
  if (body.max_tokens != null) request.max_tokens = body.max_tokens;
  return request;
}

/** How a surface pays for a request: called exactly once with the final usage. */
export type Settle = (usage: Usage, estimated: boolean) => Promise<void>;

export interface RunOptions {
  model: RoutedModel;
  request: ChatRequest;
  /** The client asked for `stream_options.include_usage`. */
  includeUsage: boolean;
  /** The prompt's token count (rpc/chat/tokens.ts), billed when the model reports none. */
  promptTokens?: number;
  settle: Settle;
}

/**
 * Runs an admitted request on its model and meters it. Non-streamed: settled from the
 * response's usage. Streamed: usage is always requested upstream, settled on the chunk that
 * carries it, and that chunk is dropped for a client that did not ask. A stream that ends
 * without usage (dropped upstream, client gone) is settled from the text streamed so far.
 */
export async function runChat(ctx: ChatContext, options: RunOptions): Promise<ChatCompletion | AsyncIterable<ChatChunk>> {
  const { model, request, includeUsage } = options;
  const observe = observeChat(ctx, model);
  const settleOnce = once(async (usage, estimated) => {
    observe.metered(usage, estimated);
    await options.settle(usage, estimated);
  }, ctx);
  const promptEstimate = options.promptTokens ?? countPromptTokens(request.messages);
  let result;
  try {
    result = await model.provider.complete(request, ctx.signal, { traceparent: ctx.traceparent });
    observe.answered();
  } catch (error) {
    await settleOnce(usageOf(0, 0), true);
    throw error;
  }
  if (result.kind === "completion") {
    const completion = result.completion;
    const content = completion.choices?.map((choice) => choice.message?.content ?? "").join("") ?? "";
    await settleOnce(completion.usage ?? usageOf(promptEstimate, countTokens(content)), !completion.usage);
    return { ...completion, model: model.id };
  }
  const chunks = result.chunks;
  const relay = (async function* relay(): AsyncGenerator<ChatChunk> {
    let streamed = "";
    try {
      for await (const chunk of chunks) {
        for (const choice of chunk.choices ?? []) {
          if (typeof choice.delta?.content !== "string" || choice.delta.content === "") continue;
          streamed += choice.delta.content;
          observe.token();
        }
        if (chunk.usage) await settleOnce(chunk.usage, false);
        if (!includeUsage) {
          if (chunk.usage && (chunk.choices?.length ?? 0) === 0) continue;
          const { usage: _dropped, ...rest } = chunk;
          yield { ...rest, model: model.id };
        } else {
          yield { ...chunk, model: model.id };
        }
      }
    } finally {
      // Dropped, cancelled or usage-less streams: bill what was streamed (estimated).
      await settleOnce(usageOf(promptEstimate, countTokens(streamed)), true);
    }
  })();
  // A generator that never started skips its `finally` on return(): a client gone before the
  // first frame would leave the hold to its lease. Settle it here instead.
  let started = false;
  return {
    [Symbol.asyncIterator]() {
      return {
        next() {
          started = true;
          return relay.next();
        },
        async return(value?: unknown) {
          if (!started) {
            started = true;
            await settleOnce(usageOf(promptEstimate, 0), true);
            void drain(chunks);
          }
          return relay.return(value as never);
        },
        throw(error?: unknown) {
          return relay.throw(error);
        },
      };
    },
  };
}

/** Closes an upstream stream nobody will read (its request is aborted with the call's signal). */
async function drain(chunks: AsyncIterable<unknown>): Promise<void> {
  try {
    await chunks[Symbol.asyncIterator]().return?.();
  } catch {
    // already closed
  }
}

function once(settle: Settle, ctx: ChatContext): Settle {
  let done = false;
  return async (usage, estimated) => {
    if (done) return;
    done = true;
    try {
      await settle(usage, estimated);
    } catch (error) {
      // The usage happened; a storage failure here must not turn a delivered answer into an error.
      ctx.deps.log.error({ requestId: ctx.requestId, error: `metering failed: ${(error as Error).message}`, usage });
    }
  };
}
