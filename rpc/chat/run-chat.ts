import type { RoutedModel } from "./model-router.js";
import { countPromptTokens, countTokens, usageOf } from "./tokens.js";
import { observeChat } from "./observe-chat.js";
import { layered, SKIP } from "../layers.js";
import { fieldReplacer, wireTextOf, withoutWireText, withWireText } from "../wire-text.js";
import type { ChatChunk, ChatCompletion, ChatRequest, ProviderResult, Usage } from "./types.js";
import type { ChatContext } from "./deps.js";
import { SURFACES } from "../surfaces.js";

/**
 * What translating a request to its upstream left out (docs/dialects.md "The matrix"): named to
 * the client in one header and in the request's log line. The Platform adds no service header
 * (docs/interface.md 4.2), and its six fields never need one.
 */
export const WARNING_HEADER = "X-Service-Warning";

function warn(ctx: ChatContext, warnings: readonly string[] | undefined): void {
  if (!warnings?.length) return;
  if (ctx.logFields) ctx.logFields.warnings = warnings;
  if (ctx.surface !== "rpc" && !SURFACES[ctx.surface].serviceHeaders) return;
  ctx.responseHeaders.set(WARNING_HEADER, warnings.join("; "));
}

/**
 * How a surface pays for a request: called exactly once with the final usage and its cost at
 * the price of the deployment that answered (docs/providers.md "Money").
 */
export type Settle = (usage: Usage, estimated: boolean, cost: number) => Promise<void>;

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
  let result: ProviderResult | undefined;
  let streamed = false;
  const settleOnce = once(async (usage, estimated) => {
    // At the price of the deployment that answered (docs/providers.md "Money"). The log line and
    // metrics get what the request used at once; the ledger waits for the answer to leave.
    const cost = ctx.deps.models.cost(model, usage, result);
    observe.metered(usage, estimated, cost);
    // docs/crash-consistency.md "No charge without an answer": where the transport can tell,
    // a request is settled only once its answer's last byte was handed to the socket. A
    // process killed before that settles nothing (its hold is released with it: memory and
    // fs at once, Redis when the lease ends), so a client that retries never pays twice. An
    // answer whose connection closed first is not charged unless it was a stream, which the
    // client got part of (billed as streamed). Nothing to charge settles at once.
    if (!ctx.delivered || (usage.prompt_tokens === 0 && usage.completion_tokens === 0)) return options.settle(usage, estimated, cost);
    void ctx.delivered().then(
      (sent) =>
        (sent || streamed ? options.settle(usage, estimated, cost) : options.settle(usageOf(0, 0), true, 0)).catch((error: unknown) =>
          meteringFailed(ctx, error, usage),
        ),
      (error: unknown) => meteringFailed(ctx, error, usage),
    );
  }, ctx);
  const promptEstimate = options.promptTokens ?? countPromptTokens(request.messages);
  try {
    result = await model.provider.complete(request, ctx.signal, { traceparent: ctx.traceparent });
    observe.answered();
    warn(ctx, result.warnings);
  } catch (error) {
    await settleOnce(usageOf(0, 0), true);
    throw error;
  }
  if (result.kind === "completion") {
    const completion = result.completion;
    const content =
      completion.choices
        ?.map(
          (choice) =>
            (choice.message?.content ?? "") +
            (choice.message?.reasoning_content ?? "") +
            (choice.message?.tool_calls ?? []).map((call) => call.function.name + call.function.arguments).join(""),
        )
        .join("") ?? "";
    await settleOnce(completion.usage ?? usageOf(promptEstimate, countTokens(content)), !completion.usage);
    return { ...completion, model: model.id };
  }
  streamed = true;
  // The relay is a layer over the upstream's chunks (rpc/layers.ts): one step of metering per
  // chunk, in the same reaction as the layers beneath (docs/performance.md "Streams").
  let text = "";
  let started = false;
  let closed = false;
  /** The upstream's usage was settled: nothing is left to estimate. */
  let metered = false;
  // Dropped, cancelled or usage-less streams: bill what was streamed (estimated).
  const close = () => {
    if (closed || metered) return Promise.resolve();
    closed = true;
    return settleOnce(usageOf(promptEstimate, countTokens(text)), true);
  };
  const done = { done: true as const, value: undefined };
  const relayed = relayFor(model.id, !includeUsage);
  return layered<ChatChunk, ChatChunk>(result.chunks[Symbol.asyncIterator](), {
    step(item) {
      started = true;
      if (item.done) return close().then(() => done);
      const chunk = item.value;
      for (const choice of chunk.choices ?? []) {
        const calls = choice.delta?.tool_calls;
        // Streamed tool calls count like content when the usage must be estimated.
        if (calls) for (const call of calls) text += (call.function?.name ?? "") + (call.function?.arguments ?? "");
        // Reasoning text is output too (billed as completion tokens by every provider).
        if (typeof choice.delta?.reasoning_content === "string") text += choice.delta.reasoning_content;
        if (typeof choice.delta?.content !== "string" || choice.delta.content === "") continue;
        text += choice.delta.content;
        observe.token();
      }
      // The usage frame of a client that did not ask for it is metered and not relayed.
      const skip = !includeUsage && chunk.usage && (chunk.choices?.length ?? 0) === 0;
      if (!chunk.usage) return { done: false, value: relayed(chunk) };
      metered = true;
      return settleOnce(chunk.usage, false).then(() => (skip ? SKIP : { done: false as const, value: relayed(chunk) }));
    },
    error(error) {
      started = true;
      return close().then(() => {
        throw error;
      });
    },
    async stop(below) {
      if (!started) {
        // Gone before the first frame: nothing was streamed, and the upstream is closed unread.
        started = true;
        closed = true;
        await settleOnce(usageOf(promptEstimate, 0), true);
        void below();
        return;
      }
      await below();
      await close();
    },
  });
}

/**
 * The chunks as the client gets them: the routed model's id, `usage` left out unless the
 * client asked for it. A chunk parsed from the upstream's frame for this stream alone (it
 * has the frame's text, rpc/wire-text.ts) is changed in place and, where those two changes
 * can be made on the text, keeps the changed text, so the SSE writer sends it without
 * serialising the chunk again (docs/performance.md "Streams"); any other chunk is copied.
 */
function relayFor(model: string, dropUsage: boolean): (chunk: ChatChunk) => ChatChunk {
  const rename = fieldReplacer("model", model);
  return (chunk) => {
    const drop = dropUsage && "usage" in chunk;
    let text = wireTextOf(chunk);
    if (text === undefined || typeof chunk.model !== "string") {
      if (!drop) return { ...chunk, model };
      const { usage: _dropped, ...rest } = chunk;
      return { ...rest, model };
    }
    const from = chunk.model;
    const usage = chunk.usage;
    chunk.model = model;
    if (drop) {
      chunk.usage = undefined;
      // Providers that stream usage put `"usage":null` on every other chunk, as its last field.
      const tail = ',"usage":null}';
      if (usage !== null || !text.endsWith(tail) || text.indexOf('"usage"') !== text.length - tail.length + 1)
        return withoutWireText(chunk);
      text = `${text.slice(0, -tail.length)}}`;
    }
    const renamed = rename(text, from);
    return renamed === undefined ? withoutWireText(chunk) : withWireText(chunk, renamed);
  };
}

function once(
  settle: (usage: Usage, estimated: boolean) => Promise<void>,
  ctx: ChatContext,
): (usage: Usage, estimated: boolean) => Promise<void> {
  let done = false;
  return async (usage, estimated) => {
    if (done) return;
    done = true;
    try {
      await settle(usage, estimated);
    } catch (error) {
      meteringFailed(ctx, error, usage);
    }
  };
}

/** The usage happened; a storage failure here must not turn a delivered answer into an error. */
function meteringFailed(ctx: ChatContext, error: unknown, usage: Usage): void {
  ctx.deps.log.error({ requestId: ctx.requestId, error: `metering failed: ${(error as Error).message}`, usage });
}
