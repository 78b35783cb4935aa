import { createHash, randomUUID } from "node:crypto";
import * as v from "valibot";
import { ServiceError } from "../../errors.js";
import { nativeOf } from "../native.js";
import type {
  ChatChunk,
  ChatCompletion,
  ChatMessage,
  ChatRequest,
  ContentPart,
  FinishReason,
  ReasoningEffort,
  ResponseFormat,
  ToolCall,
  ToolChoice,
  ToolSpec,
  Usage,
} from "../types.js";

/**
 * The OpenAI Responses API dialect (docs/dialects.md "Responses"), read tolerantly: the fields
 * the gateway acts on are validated, every other one is kept. To an upstream that serves the
 * Responses API (`apis: ["responses"]`) the request goes as it came, state included
 * (`previous_response_id`, `store`), and its answer comes back as sent. To any other model it is
 * read into the canonical chat request (function, `namespace` and `custom` tools as functions,
 * `text.format` as structured output, `reasoning.effort`) and the answer is retold as a
 * `response` object or its typed events. Translated, the service keeps no state: `store` is
 * answered `false`, and what needs stored state is a 400 saying what to send instead.
 */

const Item = v.looseObject({ type: v.optional(v.string("input[].type must be a string")) }, "input[] items must be objects");
const Tool = v.looseObject({ type: v.string("tools[].type must be a string") }, "tools[] must be objects");

const Effort = v.picklist(
  ["none", "minimal", "low", "medium", "high", "xhigh", "max"],
  "reasoning.effort must be none, minimal, low, medium, high, xhigh or max",
);

export const ResponsesBody = v.looseObject({
  model: v.pipe(v.string("model must be a string"), v.minLength(1, "model must not be empty")),
  input: v.union(
    [v.string(), v.pipe(v.array(Item), v.minLength(1, "input must not be empty"), v.maxLength(10_000))],
    "input must be a string or an array of items",
  ),
  instructions: v.nullish(v.string("instructions must be a string")),
  tools: v.nullish(v.pipe(v.array(Tool, "tools must be an array"), v.maxLength(1024, "at most 1024 tools"))),
  tool_choice: v.nullish(
    v.union(
      [v.picklist(["none", "auto", "required"]), v.looseObject({ type: v.string() })],
      'tool_choice must be "none", "auto", "required" or an object',
    ),
  ),
  parallel_tool_calls: v.nullish(v.boolean("parallel_tool_calls must be a boolean")),
  max_output_tokens: v.nullish(
    v.pipe(v.number("max_output_tokens must be an integer"), v.integer("max_output_tokens must be an integer"), v.minValue(1)),
  ),
  temperature: v.nullish(v.pipe(v.number("temperature must be a number"), v.minValue(0), v.maxValue(2))),
  top_p: v.nullish(v.pipe(v.number("top_p must be a number"), v.minValue(0), v.maxValue(1))),
  stream: v.nullish(v.boolean("stream must be a boolean")),
  /** Forwarded to a Responses upstream; translated, it is answered `false`: nothing is stored here. */
  store: v.nullish(v.boolean("store must be a boolean")),
  previous_response_id: v.nullish(v.string("previous_response_id must be a string")),
  text: v.nullish(v.looseObject({ format: v.nullish(v.looseObject({ type: v.string("text.format.type must be a string") })) })),
  reasoning: v.nullish(v.looseObject({ effort: v.nullish(Effort) })),
  metadata: v.nullish(v.record(v.string(), v.string(), "metadata must be an object of strings")),
  user: v.nullish(v.string("user must be a string")),
  safety_identifier: v.nullish(v.string("safety_identifier must be a string")),
});

export type ResponsesBodyInput = v.InferOutput<typeof ResponsesBody>;

/** Fields of a Responses request the canonical request has a place for; the rest are `untranslated`. */
const READ = new Set([
  "model",
  "input",
  "instructions",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "max_output_tokens",
  "temperature",
  "top_p",
  "stream",
  "store",
  "text",
  "reasoning",
  "metadata",
  "user",
  "safety_identifier",
  // Read as what needs stored state (unreadable when translated).
  "previous_response_id",
  "conversation",
  "background",
]);

/** Output items of tools the model provider runs (its own web search, code interpreter…). */
const SERVER_ITEM =
  /^(web_search_call|file_search_call|code_interpreter_call|image_generation_call|mcp_call|mcp_list_tools|mcp_approval_request|mcp_approval_response|tool_search_call|tool_search_output)$/;

const str = (value: unknown) => (typeof value === "string" ? value : undefined);

/** How a canonical function name maps back to the client's tool: a function (in a namespace) or a custom tool. */
export interface ToolOrigin {
  kind: "function" | "custom";
  name: string;
  namespace?: string;
}

/** Canonical function names the translation made, to their tools (absent: a plain function of that name). */
export type ToolNames = Map<string, ToolOrigin>;

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The canonical name of a namespaced function: `<namespace>__<name>`, or, when that is no valid
 * function name (too long, other characters), a shortened one with a hash of the pair.
 */
function flatName(namespace: string, name: string): string {
  const joined = `${namespace}__${name}`;
  if (NAME.test(joined)) return joined;
  const hash = createHash("sha256").update(joined).digest("hex").slice(0, 8);
  return `${joined.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 55)}_${hash}`;
}

/** The reading of one request: what has no canonical form, for the translating adapters. */
class Reading {
  readonly unreadable: { path: string; message: string }[] = [];
  readonly untranslated: string[] = [];
  readonly serverTools: { path: string; type: string }[] = [];
  readonly names: ToolNames = new Map();

  cannot(path: string, message: string): void {
    this.unreadable.push({ path, message });
  }

  /** The canonical name of a tool of the client's (and its origin, when it is not a plain function). */
  name(origin: ToolOrigin): string {
    const flat = origin.namespace ? flatName(origin.namespace, origin.name) : origin.name;
    if (origin.namespace || origin.kind === "custom") this.names.set(flat, origin);
    return flat;
  }
}

/** A custom tool (free-form text input) as a function taking that text. */
const CUSTOM_PARAMETERS = {
  type: "object",
  properties: { input: { type: "string", description: "The tool's whole input, as free-form text." } },
  required: ["input"],
  additionalProperties: false,
};

function functionOf(tool: Record<string, unknown>, name: string): ToolSpec {
  return {
    type: "function",
    function: {
      name,
      ...(str(tool.description) ? { description: tool.description as string } : {}),
      ...(tool.parameters && typeof tool.parameters === "object" ? { parameters: tool.parameters as Record<string, unknown> } : {}),
      ...(typeof tool.strict === "boolean" ? { strict: tool.strict } : {}),
    },
  };
}

function customOf(tool: Record<string, unknown>, name: string): ToolSpec {
  const format = (tool.format as { type?: unknown } | undefined)?.type;
  const note = format && format !== "text" ? ` Its input follows the tool's ${String(format)} format.` : "";
  return {
    type: "function",
    function: { name, description: `${str(tool.description) ?? ""}${note}`.trim(), parameters: CUSTOM_PARAMETERS },
  };
}

/**
 * The client's tools as canonical functions: functions as they are, a `namespace`'s functions
 * and custom tools by their canonical names, custom tools as functions of one text. Tools the
 * model provider runs (web search…) have no canonical form.
 */
function toolsOf(body: ResponsesBodyInput, reading: Reading): ToolSpec[] {
  const tools: ToolSpec[] = [];
  const add = (tool: Record<string, unknown>, path: string, namespace?: string) => {
    const name = str(tool.name);
    if (tool.type === "function" && tool.parameters != null && (typeof tool.parameters !== "object" || Array.isArray(tool.parameters)))
      throw new ServiceError("VALIDATION_FAILED", `Invalid request: ${path}.parameters: must be a JSON Schema object`, {
        details: { issues: [{ path: `${path}.parameters`, message: "must be a JSON Schema object" }] },
      });
    if (tool.type === "function" || tool.type === "custom") {
      if (!name) return reading.cannot(`${path}.name`, "is required");
      const flat = reading.name({ kind: tool.type, name, ...(namespace ? { namespace } : {}) });
      if (!NAME.test(flat)) return reading.cannot(`${path}.name`, "function names are 1-64 letters, digits, _ or - for this model");
      tools.push(tool.type === "function" ? functionOf(tool, flat) : customOf(tool, flat));
    } else reading.serverTools.push({ path, type: String(tool.type) });
  };
  for (const [index, tool] of (body.tools ?? []).entries()) {
    if (tool.type === "namespace") {
      const name = str(tool.name);
      const members = tool.tools;
      if (!name || !Array.isArray(members)) {
        reading.cannot(`tools.${index}`, "a namespace tool is {name, tools}");
        continue;
      }
      for (const [inner, member] of (members as Record<string, unknown>[]).entries())
        add(member ?? {}, `tools.${index}.tools.${inner}`, name);
    } else add(tool, `tools.${index}`);
  }
  return tools;
}

function toolChoiceOf(body: ResponsesBodyInput, reading: Reading): ToolChoice | undefined {
  const choice = body.tool_choice;
  if (choice == null) return undefined;
  if (typeof choice === "string") return choice;
  const name = str(choice.name);
  if ((choice.type === "function" || choice.type === "custom") && name) {
    const namespace = str(choice.namespace);
    const flat = namespace ? flatName(namespace, name) : name;
    return { type: "function", function: { name: flat } };
  }
  // `allowed_tools`, or one of the provider's own tools.
  reading.untranslated.push("tool_choice");
  return undefined;
}

/** The content parts of an input message, in the chat format the adapters read. */
function partsOf(content: unknown, path: string, reading: Reading): string | ContentPart[] {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) {
    reading.cannot(path, "content must be a string or an array of parts");
    return "";
  }
  const parts: ContentPart[] = [];
  for (const [index, part] of content.entries()) {
    const at = `${path}.${index}`;
    switch (part?.type) {
      case "input_text":
      case "output_text":
      case "text":
        if (typeof part.text !== "string") {
          reading.cannot(`${at}.text`, "must be a string");
          continue;
        }
        parts.push({ type: "text", text: part.text });
        continue;
      case "refusal":
        parts.push({ type: "text", text: str(part.refusal) ?? "" });
        continue;
      case "input_image": {
        const url = str(part.image_url);
        if (!url) {
          reading.cannot(
            `${at}.image_url`,
            "an image is given by image_url (a URL or a data: URL) for this model; file ids need stored files",
          );
          continue;
        }
        parts.push({ type: "image_url", image_url: { url, ...(str(part.detail) ? { detail: part.detail } : {}) } });
        continue;
      }
      case "input_file": {
        const data = str(part.file_data);
        if (!data?.startsWith("data:")) {
          reading.cannot(at, "a file is given by file_data (a data: URL) for this model; file ids and URLs need the provider's storage");
          continue;
        }
        parts.push({ type: "file", file: { file_data: data, ...(str(part.filename) ? { filename: part.filename } : {}) } });
        continue;
      }
      default:
        reading.cannot(`${at}.type`, `content part type ${JSON.stringify(part?.type)} has no equivalent for this model`);
    }
  }
  return parts;
}

const ROLES: Readonly<Record<string, string>> = { user: "user", assistant: "assistant", system: "system", developer: "system" };

/** Appends a call to the assistant turn it belongs to (consecutive calls are one turn, as the chat format has them). */
function pushCall(messages: ChatMessage[], call: ToolCall): void {
  const last = messages.at(-1);
  if (last?.role === "assistant" && last.tool_calls) last.tool_calls.push(call);
  else messages.push({ role: "assistant", content: null, tool_calls: [call] });
}

/**
 * `instructions` and `input` as chat messages: messages keep their role (`developer` is
 * `system`), `function_call` and `custom_tool_call` items become the tool calls of one
 * assistant turn, their outputs `tool` messages, reasoning items are the answering model's own
 * and stay out.
 */
function inputMessages(body: ResponsesBodyInput, reading: Reading): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (body.instructions) messages.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") {
    messages.push({ role: "user", content: body.input });
    return messages;
  }
  for (const [index, item] of body.input.entries()) {
    const at = `input.${index}`;
    const type = item.type ?? "message";
    if (type === "message") {
      const role = ROLES[String(item.role)];
      if (!role) {
        reading.cannot(`${at}.role`, "must be user, assistant, system or developer for this model");
        continue;
      }
      const content = partsOf(item.content, `${at}.content`, reading);
      // An assistant message after the calls of its turn starts a turn of its own.
      messages.push({ role, content });
      continue;
    }
    if (type === "function_call" || type === "custom_tool_call") {
      const callId = str(item.call_id);
      const name = str(item.name);
      if (!callId) {
        reading.cannot(`${at}.call_id`, "is required");
        continue;
      }
      if (!name) {
        reading.cannot(`${at}.name`, "is required");
        continue;
      }
      const namespace = str(item.namespace);
      const flat = namespace ? flatName(namespace, name) : name;
      if (!NAME.test(flat)) {
        reading.cannot(`${at}.name`, "function names are 1-64 letters, digits, _ or - for this model");
        continue;
      }
      const args = type === "function_call" ? (str(item.arguments) ?? "{}") : JSON.stringify({ input: str(item.input) ?? "" });
      pushCall(messages, { id: callId, type: "function", function: { name: flat, arguments: args } });
      continue;
    }
    if (type === "function_call_output" || type === "custom_tool_call_output") {
      const callId = str(item.call_id);
      if (!callId) {
        reading.cannot(`${at}.call_id`, "is required");
        continue;
      }
      const output = typeof item.output === "string" ? item.output : partsOf(item.output, `${at}.output`, reading);
      messages.push({ role: "tool", tool_call_id: callId, content: output });
      continue;
    }
    // A reasoning model's summary sent back: not input for another model.
    if (type === "reasoning") continue;
    if (SERVER_ITEM.test(String(type))) {
      reading.serverTools.push({ path: at, type: String(type) });
      continue;
    }
    if (type === "item_reference") {
      reading.cannot(
        `${at}.type`,
        "item_reference needs stored responses, which this model's upstream does not keep: send the item itself (with the AI SDK, providerOptions.openai.store = false)",
      );
      continue;
    }
    reading.cannot(`${at}.type`, `input item type ${JSON.stringify(type)} has no equivalent for this model`);
  }
  if (!messages.some((message) => message.role !== "system") && !reading.unreadable.length)
    throw new ServiceError("VALIDATION_FAILED", "Invalid request: input: needs at least one message", {
      details: { issues: [{ path: "input", message: "needs at least one message" }] },
    });
  return messages;
}

/** What needs stored state, which a translated request does not have. */
function stateOf(body: ResponsesBodyInput, reading: Reading): void {
  if (body.previous_response_id != null)
    reading.cannot("previous_response_id", "this model's upstream does not store responses: send the whole conversation in input instead");
  if (body.conversation != null)
    reading.cannot("conversation", "this model's upstream does not store conversations: send the whole conversation in input");
  if (body.background === true)
    reading.cannot("background", "background responses need stored responses, which this model's upstream does not keep");
}

/** `text.format` as `response_format`. */
function formatOf(body: ResponsesBodyInput, reading: Reading): ResponseFormat | undefined {
  const format = body.text?.format;
  if (format == null || format.type === "text") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type === "json_schema") {
    const name = str(format.name);
    if (!name || !format.schema || typeof format.schema !== "object") {
      reading.cannot("text.format", "a json_schema format is {type, name, schema}");
      return undefined;
    }
    return {
      type: "json_schema",
      json_schema: {
        name,
        schema: format.schema as Record<string, unknown>,
        ...(typeof format.strict === "boolean" ? { strict: format.strict } : {}),
        ...(str(format.description) ? { description: format.description as string } : {}),
      },
    };
  }
  reading.cannot("text.format.type", 'must be "text", "json_object" or "json_schema"');
  return undefined;
}

/** A Responses request as the canonical request (with the request itself as `source`) and the names its tools got. */
export function responsesToChat(body: ResponsesBodyInput): { request: ChatRequest; names: ToolNames } {
  const reading = new Reading();
  stateOf(body, reading);
  const request: ChatRequest = { model: body.model, messages: inputMessages(body, reading) };
  if (body.stream != null) request.stream = body.stream;
  if (body.temperature != null) request.temperature = body.temperature;
  if (body.top_p != null) request.top_p = body.top_p;
  if (body.max_output_tokens != null) request.max_tokens = body.max_output_tokens;
  const tools = toolsOf(body, reading);
  if (tools.length) {
    request.tools = tools;
    const choice = toolChoiceOf(body, reading);
    if (choice) request.tool_choice = choice;
    if (body.parallel_tool_calls != null) request.parallel_tool_calls = body.parallel_tool_calls;
  }
  const format = formatOf(body, reading);
  if (format) request.response_format = format;
  if (body.reasoning?.effort != null) request.reasoning_effort = body.reasoning.effort as ReasoningEffort;
  if (body.metadata != null) request.metadata = body.metadata;
  const user = body.safety_identifier ?? body.user;
  if (user != null) request.user = user;
  // `text.verbosity` is the chat format's `verbosity`.
  const verbosity = str((body.text as { verbosity?: unknown } | null | undefined)?.verbosity);
  if (verbosity) request.extra = { verbosity };
  for (const field of Object.keys(body)) if (!READ.has(field)) reading.untranslated.push(field);
  request.source = {
    dialect: "responses",
    body,
    untranslated: reading.untranslated,
    serverTools: reading.serverTools,
    unreadable: reading.unreadable,
  };
  return { request, names: reading.names };
}

type OutputItem = { type: string; [field: string]: unknown };

/** What a response echoes of its request, whatever its output. */
function shell(body: ResponsesBodyInput, id: string, created: number, model: string) {
  return {
    id,
    object: "response",
    created_at: created,
    status: "in_progress",
    error: null,
    incomplete_details: null as { reason: string } | null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model,
    output: [] as OutputItem[],
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: null },
    store: false,
    temperature: body.temperature ?? null,
    text: { format: body.text?.format ?? { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    top_p: body.top_p ?? null,
    truncation: "disabled",
    usage: null as ResponsesUsage | null,
    user: body.user ?? null,
    metadata: body.metadata ?? {},
  };
}

type ResponsesUsage = {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
};

function usageOf(usage: Usage): ResponsesUsage {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: usage.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: usage.total_tokens,
  };
}

/** `length` ends a response `incomplete`; anything else `completed`. */
function ending(finish: FinishReason | null | undefined) {
  return finish === "length"
    ? { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } }
    : finish === "content_filter"
      ? { status: "incomplete", incomplete_details: { reason: "content_filter" } }
      : { status: "completed", incomplete_details: null };
}

const itemId = (prefix: string) => `${prefix}_${randomUUID().replaceAll("-", "")}`;

function messageItem(id: string, text: string, status = "completed"): OutputItem {
  return {
    type: "message",
    id,
    status,
    role: "assistant",
    content: text ? [{ type: "output_text", text, annotations: [], logprobs: [] }] : [],
  };
}

function reasoningItem(id: string, text: string): OutputItem {
  return { type: "reasoning", id, summary: text ? [{ type: "summary_text", text }] : [] };
}

/** A canonical call as the client's item: a function call (with its namespace) or a custom tool call. */
function callItem(id: string, call: ToolCall, names: ToolNames, status = "completed"): OutputItem {
  const origin = names.get(call.function.name);
  if (origin?.kind === "custom") {
    let input = call.function.arguments;
    try {
      const parsed = JSON.parse(call.function.arguments) as { input?: unknown };
      if (typeof parsed?.input === "string") input = parsed.input;
    } catch {
      // Not JSON: the model's text is the input.
    }
    return {
      type: "custom_tool_call",
      id,
      call_id: call.id,
      name: origin.name,
      input,
      status,
      ...(origin.namespace ? { namespace: origin.namespace } : {}),
    };
  }
  return {
    type: "function_call",
    id,
    call_id: call.id,
    name: origin?.name ?? call.function.name,
    arguments: call.function.arguments,
    status,
    ...(origin?.namespace ? { namespace: origin.namespace } : {}),
  };
}

/** A response of the Responses upstream with the model id the client asked for. */
function withModel(value: unknown, model: string): unknown {
  return value && typeof value === "object" ? { ...(value as object), model } : value;
}

/** A chat completion as a `response` object: a Responses upstream's own, or retold. */
export function toResponse(body: ResponsesBodyInput, completion: ChatCompletion, names: ToolNames): RetoldResponse {
  const native = nativeOf(completion, "responses")?.body;
  if (native) return withModel(native, completion.model) as RetoldResponse;
  return retoldResponse(body, completion, names);
}

type RetoldResponse = ReturnType<typeof retoldResponse>;

function retoldResponse(body: ResponsesBodyInput, completion: ChatCompletion, names: ToolNames) {
  const response = shell(body, itemId("resp"), Math.floor(Date.now() / 1000), completion.model);
  const choice = completion.choices[0];
  if (choice?.message.reasoning_content) response.output.push(reasoningItem(itemId("rs"), choice.message.reasoning_content));
  const text = choice?.message.content ?? "";
  if (text) response.output.push(messageItem(itemId("msg"), text));
  for (const call of choice?.message.tool_calls ?? []) response.output.push(callItem(itemId("fc"), call, names));
  if (completion.usage) response.usage = usageOf(completion.usage);
  return { ...response, ...ending(choice?.finish_reason) };
}

interface OpenItem {
  index: number;
  item: OutputItem;
  kind: "message" | "reasoning" | "call";
  text: string;
  call?: ToolCall;
}

/**
 * Chat chunks as the Responses stream (docs/dialects.md "Responses"). From a Responses
 * upstream, the events it sent, with the model id the client asked for. Otherwise retold:
 * `response.created`, `response.in_progress`, then per output item `response.output_item.added`,
 * its deltas (`response.reasoning_summary_text.delta`, `response.output_text.delta` in a
 * content part, `response.function_call_arguments.delta`; a custom tool's input whole in one
 * `response.custom_tool_call_input.delta`) and their `…done` events, and last
 * `response.completed` (or `response.incomplete`) with the whole response and its usage. Every
 * event carries a `sequence_number`.
 */
export async function* responseEvents(
  body: ResponsesBodyInput,
  chunks: AsyncIterable<ChatChunk>,
  names: ToolNames,
): AsyncGenerator<Record<string, unknown>> {
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>) => ({ type, sequence_number: sequence++, ...fields });
  const response = shell(body, itemId("resp"), Math.floor(Date.now() / 1000), body.model);
  const items: OpenItem[] = [];
  let open: OpenItem | undefined;
  const calls = new Map<number, OpenItem>();
  let finish: FinishReason | null | undefined;
  let usage: Usage | undefined;
  let started = false;
  let native = false;

  const start = function* () {
    if (started) return;
    started = true;
    yield event("response.created", { response: { ...response } });
    yield event("response.in_progress", { response: { ...response } });
  };

  function* close(item: OpenItem | undefined) {
    if (!item || item !== open) return;
    open = undefined;
    const id = item.item.id as string;
    const base = { item_id: id, output_index: item.index };
    if (item.kind === "call") {
      item.item = callItem(id, item.call!, names);
      if (item.item.type === "custom_tool_call") {
        yield event("response.custom_tool_call_input.delta", { ...base, delta: item.item.input });
        yield event("response.custom_tool_call_input.done", { ...base, input: item.item.input });
      } else
        yield event("response.function_call_arguments.done", { ...base, name: item.item.name, arguments: item.call!.function.arguments });
    } else if (item.kind === "reasoning") {
      const part = { type: "summary_text", text: item.text };
      yield event("response.reasoning_summary_text.done", { ...base, summary_index: 0, text: item.text });
      yield event("response.reasoning_summary_part.done", { ...base, summary_index: 0, part });
      item.item = reasoningItem(id, item.text);
    } else {
      const part = { type: "output_text", text: item.text, annotations: [], logprobs: [] };
      yield event("response.output_text.done", { ...base, content_index: 0, text: item.text, logprobs: [] });
      yield event("response.content_part.done", { ...base, content_index: 0, part });
      item.item = messageItem(id, item.text);
    }
    yield event("response.output_item.done", { output_index: item.index, item: item.item });
  }

  function* opening(kind: "message" | "reasoning") {
    if (open?.kind === kind) return open;
    yield* close(open);
    const id = itemId(kind === "message" ? "msg" : "rs");
    const item: OpenItem = {
      index: items.length,
      kind,
      item: kind === "message" ? messageItem(id, "", "in_progress") : reasoningItem(id, ""),
      text: "",
    };
    items.push(item);
    open = item;
    yield event("response.output_item.added", { output_index: item.index, item: item.item });
    if (kind === "message")
      yield event("response.content_part.added", {
        item_id: id,
        output_index: item.index,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [], logprobs: [] },
      });
    else
      yield event("response.reasoning_summary_part.added", {
        item_id: id,
        output_index: item.index,
        summary_index: 0,
        part: { type: "summary_text", text: "" },
      });
    return item;
  }

  for await (const chunk of chunks) {
    const events = nativeOf(chunk, "responses")?.events;
    if (events) {
      native = true;
      for (const upstream of events)
        yield "response" in upstream ? { ...upstream, response: withModel(upstream.response, body.model) } : upstream;
      continue;
    }
    yield* start();
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    const thinking = choice.delta?.reasoning_content;
    if (typeof thinking === "string" && thinking !== "") {
      const item = yield* opening("reasoning");
      item.text += thinking;
      yield event("response.reasoning_summary_text.delta", {
        item_id: item.item.id,
        output_index: item.index,
        summary_index: 0,
        delta: thinking,
      });
    }
    const text = choice.delta?.content;
    if (typeof text === "string" && text !== "") {
      const item = yield* opening("message");
      item.text += text;
      yield event("response.output_text.delta", {
        item_id: item.item.id,
        output_index: item.index,
        content_index: 0,
        delta: text,
        logprobs: [],
      });
    }
    for (const delta of choice.delta?.tool_calls ?? []) {
      const key = delta.index ?? 0;
      let item = calls.get(key);
      if (!item) {
        yield* close(open);
        const call: ToolCall = {
          id: delta.id ?? itemId("call"),
          type: "function",
          function: { name: delta.function?.name ?? "", arguments: "" },
        };
        item = { index: items.length, kind: "call", item: callItem(itemId("fc"), call, names, "in_progress"), text: "", call };
        if (item.item.type === "function_call") item.item.arguments = "";
        else item.item.input = "";
        calls.set(key, item);
        items.push(item);
        open = item;
        yield event("response.output_item.added", { output_index: item.index, item: item.item });
      } else if (delta.function?.name) {
        item.call!.function.name += delta.function.name;
      }
      const args = delta.function?.arguments;
      if (args) {
        item.call!.function.arguments += args;
        // A custom tool's input is its text, known once the call's arguments are whole.
        if (item.item.type === "function_call")
          yield event("response.function_call_arguments.delta", { item_id: item.item.id, output_index: item.index, delta: args });
      }
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  if (native) return;
  yield* start();
  yield* close(open);
  response.output = items.map((item) => item.item);
  if (usage) response.usage = usageOf(usage);
  const end = ending(finish);
  yield event(end.status === "completed" ? "response.completed" : "response.incomplete", { response: { ...response, ...end } });
}
