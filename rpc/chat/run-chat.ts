import * as v from "valibot";
import type { RoutedModel } from "./model-router.js";
import { countPromptTokens, countTokens, usageOf } from "./tokens.js";
import { observeChat } from "./observe-chat.js";
import { layered, SKIP } from "../layers.js";
import { fieldReplacer, wireTextOf, withoutWireText, withWireText } from "../wire-text.js";
import type { ChatChunk, ChatCompletion, ChatMessage, ChatRequest, ProviderResult, ToolSpec, Usage } from "./types.js";
import type { ChatContext } from "./deps.js";

/** The roles a message may have (docs/models-and-chat.md); anything else is 400. */
const ROLES = ["system", "user", "assistant", "tool"] as const;

const Role = v.pipe(
  v.string("messages[].role must be a string"),
  v.minLength(1, "messages[].role is required"),
  v.check((role) => (ROLES as readonly string[]).includes(role), "messages[].role must be system, user, assistant or tool"),
);
const Content = v.nullable(
  v.union([v.string(), v.array(v.record(v.string(), v.unknown()))], "messages[].content must be a string or an array of content parts"),
);

/** Platform API (docs/interface.md 2.2): `{role, content}`; other message fields are dropped. */
const Message = v.object({ role: Role, content: Content });

const FunctionName = v.pipe(
  v.string("function names must be strings"),
  v.regex(/^[A-Za-z0-9_-]{1,64}$/, "function names are 1-64 letters, digits, _ or -"),
);

const ToolCallShape = v.object({
  id: v.pipe(v.string("tool_calls[].id must be a string"), v.minLength(1, "tool_calls[].id must not be empty")),
  type: v.literal("function", 'tool_calls[].type must be "function"'),
  function: v.object(
    { name: FunctionName, arguments: v.string("tool_calls[].function.arguments must be a string (JSON)") },
    "tool_calls[].function must be {name, arguments}",
  ),
});

/** Account and Gateway surfaces: tool calls of an assistant turn and the results that answer them. */
const ToolMessage = v.pipe(
  v.object({
    role: Role,
    content: v.optional(Content),
    tool_calls: v.optional(v.pipe(v.array(ToolCallShape, "messages[].tool_calls must be an array"), v.maxLength(128))),
    tool_call_id: v.optional(v.pipe(v.string("messages[].tool_call_id must be a string"), v.minLength(1))),
    name: v.optional(v.string("messages[].name must be a string")),
  }),
  v.check(
    (message) => message.content !== undefined || message.tool_calls !== undefined,
    "messages[].content is required (it may be null on an assistant message with tool_calls)",
  ),
  v.check((message) => message.role !== "tool" || message.tool_call_id !== undefined, "messages[] with role tool need a tool_call_id"),
  v.check((message) => message.tool_calls === undefined || message.role === "assistant", "only assistant messages carry tool_calls"),
);

const Tool = v.object({
  type: v.literal("function", 'tools[].type must be "function"'),
  function: v.object(
    {
      name: FunctionName,
      description: v.optional(v.string("tools[].function.description must be a string")),
      parameters: v.optional(v.record(v.string(), v.unknown(), "tools[].function.parameters must be a JSON Schema object")),
      strict: v.optional(v.nullable(v.boolean("tools[].function.strict must be a boolean"))),
    },
    "tools[].function must be {name, description, parameters}",
  ),
});

const ToolChoice = v.union(
  [v.picklist(["none", "auto", "required"]), v.object({ type: v.literal("function"), function: v.object({ name: FunctionName }) })],
  'tool_choice must be "none", "auto", "required" or {type: "function", function: {name}}',
);

const Fields = {
  model: v.optional(v.pipe(v.string("model must be a string"), v.minLength(1, "model must not be empty"))),
  stream: v.nullish(v.boolean("stream must be a boolean")),
  temperature: v.nullish(v.pipe(v.number("temperature must be a number"), v.minValue(0), v.maxValue(2))),
  top_p: v.nullish(v.pipe(v.number("top_p must be a number"), v.minValue(0), v.maxValue(1))),
  max_tokens: v.nullish(v.pipe(v.number("max_tokens must be an integer"), v.integer("max_tokens must be an integer"), v.minValue(1))),
};

const StreamOptions = v.nullish(v.object({ include_usage: v.nullish(v.boolean("stream_options.include_usage must be a boolean")) }));

// docs/interface.md 7.2: one message saying both are required, whichever is missing.
const bothRequired = <T extends { model?: string; messages?: readonly unknown[] }>() =>
  v.check<T, string>((body) => body.model !== undefined && body.messages !== undefined, "Both model and messages are required");

/**
 * A Platform API chat body (docs/interface.md 2.2, 4.2): exactly the six fields; everything else, including
 * `stream_options` and `tools`, is dropped without error, so a Platform stream never carries a
 * usage chunk (the service still asks the upstream for usage to meter the stream: an internal detail).
 */
export const PlatformChatBody = v.pipe(
  v.object({
    ...Fields,
    messages: v.optional(
      v.pipe(v.array(Message, "messages must be an array of {role, content}"), v.minLength(1, "messages must not be empty")),
    ),
  }),
  bothRequired(),
);

/**
 * An Account or Gateway chat request body: the six fields, `stream_options` (docs/interface.md 2.2, Account:
 * `include_usage` puts usage on the final chunk) and function calling (`tools`, `tool_choice`,
 * `parallel_tool_calls`, assistant `tool_calls`, `tool` messages), validated and forwarded to the
 * model (docs/models-and-chat.md "Tool calls"). Other fields are dropped without error.
 */
export const ToolChatBody = v.pipe(
  v.object({
    ...Fields,
    stream_options: StreamOptions,
    messages: v.optional(
      v.pipe(v.array(ToolMessage, "messages must be an array of {role, content}"), v.minLength(1, "messages must not be empty")),
    ),
    tools: v.nullish(
      v.pipe(v.array(Tool, 'tools must be an array of {type: "function", function}'), v.maxLength(128, "at most 128 tools")),
    ),
    tool_choice: v.nullish(ToolChoice),
    parallel_tool_calls: v.nullish(v.boolean("parallel_tool_calls must be a boolean")),
  }),
  bothRequired(),
);

export type PlatformChatBodyInput = v.InferOutput<typeof PlatformChatBody>;
export type ToolChatBodyInput = v.InferOutput<typeof ToolChatBody>;
export type ChatBodyInput = PlatformChatBodyInput | ToolChatBodyInput;

/** The six forwarded fields, without nulls (docs/interface.md 2.2: omitted means the model's default). */
export function toChatRequest(body: ChatBodyInput): ChatRequest {
  const request: ChatRequest = {
    model: body.model!,
    messages: body.messages!.map(({ role, content }) => ({ role, content: content ?? null })),
  };
  if (body.stream != null) request.stream = body.stream;
  if (body.temperature != null) request.temperature = body.temperature;
  if (body.top_p != null) request.top_p = body.top_p;
  if (body.max_tokens != null) request.max_tokens = body.max_tokens;
  return request;
}

/** The six fields plus function calling (Account and Gateway surfaces). */
export function toToolChatRequest(body: ToolChatBodyInput): ChatRequest {
  const request = toChatRequest(body);
  request.messages = body.messages!.map((message) => {
    const out: ChatMessage = { role: message.role, content: message.content ?? null };
    if (message.tool_calls) out.tool_calls = message.tool_calls;
    if (message.tool_call_id !== undefined) out.tool_call_id = message.tool_call_id;
    if (message.name !== undefined) out.name = message.name;
    return out;
  });
  if (body.tools?.length) request.tools = body.tools as ToolSpec[];
  if (body.tool_choice != null) request.tool_choice = body.tool_choice;
  if (body.parallel_tool_calls != null) request.parallel_tool_calls = body.parallel_tool_calls;
  return request;
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
