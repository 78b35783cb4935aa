import * as v from "valibot";
import type { ChatMessage, ChatRequest, ReasoningEffort, ResponseFormat, ToolChoice, ToolSpec } from "../types.js";

/**
 * The chat completions dialect (docs/interface.md 2.2, docs/dialects.md "Chat completions"). The
 * Platform reads its six fields and drops the rest (spec 4.2). The Account and Gateway APIs read
 * tolerantly: the fields the gateway acts on are validated and typed, every other field is kept,
 * and the whole body goes as it came to an upstream of the chat format, with only the model id
 * (and, streaming, `stream_options.include_usage` for metering) changed.
 */

/** The roles a Platform message may have (docs/models-and-chat.md); anything else is 400. */
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

const ToolCallShape = v.looseObject({
  id: v.pipe(v.string("tool_calls[].id must be a string"), v.minLength(1, "tool_calls[].id must not be empty")),
  type: v.literal("function", 'tool_calls[].type must be "function"'),
  function: v.looseObject(
    { name: FunctionName, arguments: v.string("tool_calls[].function.arguments must be a string (JSON)") },
    "tool_calls[].function must be {name, arguments}",
  ),
});

/**
 * An Account or Gateway message: any role (`developer` is read as `system`; a role the model's
 * provider has no place for is refused when translating), the tool calls of an assistant turn,
 * the result that answers one, and any other field, kept.
 */
const OpenMessage = v.pipe(
  v.looseObject({
    role: v.pipe(v.string("messages[].role must be a string"), v.minLength(1, "messages[].role is required")),
    content: v.optional(Content),
    tool_calls: v.optional(v.pipe(v.array(ToolCallShape, "messages[].tool_calls must be an array"), v.maxLength(128))),
    tool_call_id: v.optional(v.pipe(v.string("messages[].tool_call_id must be a string"), v.minLength(1))),
    name: v.optional(v.string("messages[].name must be a string")),
    reasoning_content: v.nullish(v.string("messages[].reasoning_content must be a string")),
  }),
  v.check(
    (message) => message.content !== undefined || message.tool_calls !== undefined,
    "messages[].content is required (it may be null on an assistant message with tool_calls)",
  ),
  v.check((message) => message.role !== "tool" || message.tool_call_id !== undefined, "messages[] with role tool need a tool_call_id"),
  v.check((message) => message.tool_calls === undefined || message.role === "assistant", "only assistant messages carry tool_calls"),
);

/** A tool: a function the gateway can translate, or another type, kept for a chat-format upstream. */
const Tool = v.pipe(
  v.looseObject({ type: v.string("tools[].type must be a string") }, "tools[] must be objects"),
  v.check(
    (tool) => tool.type !== "function" || v.is(FunctionDef, tool.function),
    "tools[].function must be {name, description, parameters} with a name of 1-64 letters, digits, _ or -",
  ),
);
const FunctionDef = v.looseObject({
  name: FunctionName,
  description: v.nullish(v.string()),
  parameters: v.nullish(v.record(v.string(), v.unknown())),
  strict: v.nullish(v.boolean()),
});

const ToolChoiceSchema = v.union(
  [
    v.picklist(["none", "auto", "required"]),
    v.looseObject({ type: v.string(), function: v.optional(v.looseObject({ name: FunctionName })) }),
  ],
  'tool_choice must be "none", "auto", "required" or {type: "function", function: {name}}',
);

const Fields = {
  model: v.optional(v.pipe(v.string("model must be a string"), v.minLength(1, "model must not be empty"))),
  stream: v.nullish(v.boolean("stream must be a boolean")),
  temperature: v.nullish(v.pipe(v.number("temperature must be a number"), v.minValue(0), v.maxValue(2))),
  top_p: v.nullish(v.pipe(v.number("top_p must be a number"), v.minValue(0), v.maxValue(1))),
  max_tokens: v.nullish(v.pipe(v.number("max_tokens must be an integer"), v.integer("max_tokens must be an integer"), v.minValue(1))),
};

const Int = (field: string, min: number) =>
  v.nullish(v.pipe(v.number(`${field} must be an integer`), v.integer(`${field} must be an integer`), v.minValue(min)));
const Num = (field: string) => v.nullish(v.number(`${field} must be a number`));

const StreamOptions = v.nullish(
  v.looseObject(
    { include_usage: v.nullish(v.boolean("stream_options.include_usage must be a boolean")) },
    "stream_options must be an object",
  ),
);

export const ResponseFormatSchema = v.variant(
  "type",
  [
    v.looseObject({ type: v.literal("text") }),
    v.looseObject({ type: v.literal("json_object") }),
    v.looseObject({
      type: v.literal("json_schema"),
      json_schema: v.looseObject(
        {
          name: v.pipe(v.string("response_format.json_schema.name must be a string"), v.minLength(1)),
          schema: v.optional(v.record(v.string(), v.unknown(), "response_format.json_schema.schema must be a JSON Schema object")),
          strict: v.nullish(v.boolean()),
          description: v.nullish(v.string()),
        },
        "response_format.json_schema must be {name, schema}",
      ),
    }),
  ],
  'response_format.type must be "text", "json_object" or "json_schema"',
);

const Effort = v.picklist(
  ["none", "minimal", "low", "medium", "high", "xhigh", "max"],
  "reasoning_effort must be none, minimal, low, medium, high, xhigh or max",
);

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
 * An Account or Gateway chat body, read tolerantly (docs/dialects.md "Chat completions"): the
 * fields the gateway acts on or translates are validated, every other field is kept.
 */
export const ChatBody = v.pipe(
  v.looseObject({
    ...Fields,
    max_completion_tokens: Int("max_completion_tokens", 1),
    stream_options: StreamOptions,
    messages: v.optional(
      v.pipe(v.array(OpenMessage, "messages must be an array of {role, content}"), v.minLength(1, "messages must not be empty")),
    ),
    tools: v.nullish(v.pipe(v.array(Tool, "tools must be an array of {type, function}"), v.maxLength(128, "at most 128 tools"))),
    tool_choice: v.nullish(ToolChoiceSchema),
    parallel_tool_calls: v.nullish(v.boolean("parallel_tool_calls must be a boolean")),
    stop: v.nullish(
      v.union(
        [v.string(), v.pipe(v.array(v.string()), v.maxLength(4, "at most 4 stop sequences"))],
        "stop must be a string or an array of up to 4 strings",
      ),
    ),
    response_format: v.nullish(ResponseFormatSchema),
    seed: v.nullish(v.pipe(v.number("seed must be an integer"), v.integer("seed must be an integer"))),
    n: Int("n", 1),
    logprobs: v.nullish(v.boolean("logprobs must be a boolean")),
    top_logprobs: Int("top_logprobs", 0),
    presence_penalty: Num("presence_penalty"),
    frequency_penalty: Num("frequency_penalty"),
    user: v.nullish(v.string("user must be a string")),
    metadata: v.nullish(v.record(v.string(), v.string(), "metadata must be an object of strings")),
    reasoning_effort: v.nullish(Effort),
  }),
  bothRequired(),
);

export type PlatformChatBodyInput = v.InferOutput<typeof PlatformChatBody>;
export type ChatBodyInput = v.InferOutput<typeof ChatBody>;

/** The six forwarded fields, without nulls (docs/interface.md 2.2: omitted means the model's default). */
export function toChatRequest(body: PlatformChatBodyInput): ChatRequest {
  const request: ChatRequest = {
    model: body.model!,
    messages: body.messages!.map(({ role, content }) => ({ role, content: content ?? null })),
    sixFields: true,
  };
  setSix(request, body);
  return request;
}

function setSix(request: ChatRequest, body: PlatformChatBodyInput | ChatBodyInput): void {
  if (body.stream != null) request.stream = body.stream;
  if (body.temperature != null) request.temperature = body.temperature;
  if (body.top_p != null) request.top_p = body.top_p;
  if (body.max_tokens != null) request.max_tokens = body.max_tokens;
}

/** The fields of a chat body the canonical request types; every other one is `extra`. */
const TYPED = new Set([
  "model",
  "messages",
  "stream",
  "stream_options",
  "temperature",
  "top_p",
  "max_tokens",
  "max_completion_tokens",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
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
]);

/** Message fields the canonical message keeps; others reach chat-format upstreams only. */
function messageOf(message: ChatBodyInput["messages"] extends (infer M)[] | undefined ? M : never): ChatMessage {
  const out: ChatMessage = { role: message.role, content: message.content ?? null };
  if (message.tool_calls)
    out.tool_calls = message.tool_calls.map(({ id, function: fn }) => ({
      id,
      type: "function",
      function: { name: fn.name, arguments: fn.arguments },
    }));
  if (message.tool_call_id !== undefined) out.tool_call_id = message.tool_call_id;
  if (message.name !== undefined) out.name = message.name;
  if (message.reasoning_content) out.reasoning_content = message.reasoning_content;
  return out;
}

/**
 * An Account or Gateway chat body as the canonical request: every field typed, the rest in
 * `extra`, and the body itself as `source`, forwarded as it is to a chat-format upstream.
 */
export function chatToCanonical(body: ChatBodyInput): ChatRequest {
  const request: ChatRequest = { model: body.model!, messages: body.messages!.map(messageOf) };
  setSix(request, body);
  if (body.max_completion_tokens != null) request.max_tokens = body.max_completion_tokens;
  const functions = (body.tools ?? []).filter((tool) => tool.type === "function");
  if (functions.length) request.tools = functions as unknown as ToolSpec[];
  const untranslated: string[] = [];
  if (body.tool_choice != null) {
    // `allowed_tools` and `custom` choices have no canonical form: a chat-format upstream gets them as sent.
    if (typeof body.tool_choice === "object" && body.tool_choice.type !== "function") untranslated.push("tool_choice");
    else request.tool_choice = body.tool_choice as ToolChoice;
  }
  if (body.parallel_tool_calls != null) request.parallel_tool_calls = body.parallel_tool_calls;
  if (body.stop != null) request.stop = body.stop;
  if (body.response_format != null) request.response_format = body.response_format as ResponseFormat;
  if (body.seed != null) request.seed = body.seed;
  if (body.n != null) request.n = body.n;
  if (body.logprobs != null) request.logprobs = body.logprobs;
  if (body.top_logprobs != null) request.top_logprobs = body.top_logprobs;
  if (body.presence_penalty != null) request.presence_penalty = body.presence_penalty;
  if (body.frequency_penalty != null) request.frequency_penalty = body.frequency_penalty;
  if (body.user != null) request.user = body.user;
  if (body.metadata != null) request.metadata = body.metadata;
  if (body.reasoning_effort != null) request.reasoning_effort = body.reasoning_effort as ReasoningEffort;
  const extra: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(body)) if (!TYPED.has(field) && value !== undefined) extra[field] = value;
  if (Object.keys(extra).length) request.extra = extra;
  // Tools of other types (`custom`…) have no canonical form: a chat-format upstream gets them as sent.
  const serverTools = (body.tools ?? []).flatMap((tool, index) =>
    tool.type === "function" ? [] : [{ path: `tools.${index}`, type: tool.type }],
  );
  request.source = { dialect: "chat", body, untranslated, serverTools };
  return request;
}
