import { randomUUID } from "node:crypto";
import * as v from "valibot";
import { ServiceError } from "../../errors.js";
import type {
  ChatChunk,
  ChatCompletion,
  ChatMessage,
  ChatRequest,
  ContentPart,
  FinishReason,
  ToolCall,
  ToolChoice,
  Usage,
} from "../types.js";

/**
 * The OpenAI Responses API dialect (docs/dialects.md "Responses"): a request is read into the
 * canonical chat request, so it runs through the same models, deployments, holds and metering
 * as a chat completion; the answer is retold as a `response` object or its typed stream events.
 * Stateless: nothing is stored, so `previous_response_id`, `conversation` and `item_reference`
 * inputs are refused with 400 and `store` is answered `false`.
 */

const FunctionName = v.pipe(
  v.string("function names must be strings"),
  v.regex(/^[A-Za-z0-9_-]{1,64}$/, "function names are 1-64 letters, digits, _ or -"),
);

const FunctionTool = v.object(
  {
    type: v.literal("function", 'tools[].type must be "function" (this service runs no built-in tools)'),
    name: FunctionName,
    description: v.nullish(v.string("tools[].description must be a string")),
    parameters: v.nullish(v.record(v.string(), v.unknown(), "tools[].parameters must be a JSON Schema object")),
    strict: v.nullish(v.boolean("tools[].strict must be a boolean")),
  },
  'tools[] must be {type: "function", name, parameters}',
);

const ToolChoiceInput = v.union(
  [v.picklist(["none", "auto", "required"]), v.object({ type: v.literal("function"), name: FunctionName })],
  'tool_choice must be "none", "auto", "required" or {type: "function", name}',
);

/** An input item, read field by field in `inputMessages` (its messages say which item and field is wrong). */
const Item = v.looseObject({ type: v.optional(v.string("input[].type must be a string")) }, "input[] items must be objects");

export const ResponsesBody = v.object({
  model: v.pipe(v.string("model must be a string"), v.minLength(1, "model must not be empty")),
  input: v.union(
    [v.string(), v.pipe(v.array(Item), v.minLength(1, "input must not be empty"), v.maxLength(10_000))],
    "input must be a string or an array of items",
  ),
  instructions: v.nullish(v.string("instructions must be a string")),
  tools: v.nullish(v.pipe(v.array(FunctionTool, "tools must be an array"), v.maxLength(128, "at most 128 tools"))),
  tool_choice: v.nullish(ToolChoiceInput),
  parallel_tool_calls: v.nullish(v.boolean("parallel_tool_calls must be a boolean")),
  max_output_tokens: v.nullish(
    v.pipe(v.number("max_output_tokens must be an integer"), v.integer("max_output_tokens must be an integer"), v.minValue(1)),
  ),
  temperature: v.nullish(v.pipe(v.number("temperature must be a number"), v.minValue(0), v.maxValue(2))),
  top_p: v.nullish(v.pipe(v.number("top_p must be a number"), v.minValue(0), v.maxValue(1))),
  stream: v.nullish(v.boolean("stream must be a boolean")),
  /** Accepted (clients send OpenAI's default, true) and answered `false`: nothing is stored. */
  store: v.nullish(v.boolean("store must be a boolean")),
  previous_response_id: v.nullish(v.string("previous_response_id must be a string")),
  conversation: v.nullish(v.unknown()),
  metadata: v.nullish(v.record(v.string(), v.string(), "metadata must be an object of strings")),
  user: v.nullish(v.string("user must be a string")),
});

export type ResponsesBodyInput = v.InferOutput<typeof ResponsesBody>;

function invalid(path: string, message: string): ServiceError {
  return new ServiceError("VALIDATION_FAILED", `Invalid request: ${path}: ${message}`, { details: { issues: [{ path, message }] } });
}

/** Refuses what needs state this service does not keep (docs/dialects.md "Responses"). */
function refuseState(body: ResponsesBodyInput): void {
  if (body.previous_response_id != null)
    throw invalid(
      "previous_response_id",
      "this service does not store responses: send the whole conversation in input instead of previous_response_id",
    );
  if (body.conversation != null)
    throw invalid("conversation", "this service does not store conversations: send the whole conversation in input");
}

const str = (value: unknown) => (typeof value === "string" ? value : undefined);

/** The content parts of an input message, in the chat format the adapters read. */
function partsOf(content: unknown, path: string): string | ContentPart[] {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw invalid(path, "content must be a string or an array of parts");
  return content.map((part: Record<string, unknown>, index) => {
    const at = `${path}.${index}`;
    switch (part?.type) {
      case "input_text":
      case "output_text":
      case "text":
        if (typeof part.text !== "string") throw invalid(`${at}.text`, "must be a string");
        return { type: "text", text: part.text };
      case "refusal":
        return { type: "text", text: str(part.refusal) ?? "" };
      case "input_image": {
        const url = str(part.image_url);
        if (!url) throw invalid(`${at}.image_url`, "an image is given by image_url (a URL or a data: URL); file ids need stored files");
        return { type: "image_url", image_url: { url, ...(str(part.detail) ? { detail: part.detail } : {}) } };
      }
      default:
        throw invalid(`${at}.type`, `content part type ${JSON.stringify(part?.type)} is not supported (input_text, input_image)`);
    }
  });
}

const ROLES: Readonly<Record<string, string>> = { user: "user", assistant: "assistant", system: "system", developer: "system" };

/**
 * `instructions` and `input` as chat messages: messages keep their role (`developer` is
 * `system`), `function_call` items become the tool calls of one assistant turn, and each
 * `function_call_output` a `tool` message.
 */
function inputMessages(body: ResponsesBodyInput): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (body.instructions) messages.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") {
    messages.push({ role: "user", content: body.input });
    return messages;
  }
  body.input.forEach((item: Record<string, unknown>, index) => {
    const at = `input.${index}`;
    const type = item.type ?? "message";
    if (type === "message") {
      const role = ROLES[String(item.role)];
      if (!role) throw invalid(`${at}.role`, "must be user, assistant, system or developer");
      messages.push({ role, content: partsOf(item.content, `${at}.content`) });
      return;
    }
    if (type === "function_call") {
      const callId = str(item.call_id);
      const name = str(item.name);
      if (!callId) throw invalid(`${at}.call_id`, "is required");
      if (!name || !/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw invalid(`${at}.name`, "function names are 1-64 letters, digits, _ or -");
      const call: ToolCall = { id: callId, type: "function", function: { name, arguments: str(item.arguments) ?? "{}" } };
      const last = messages.at(-1);
      // Consecutive calls are one assistant turn, as the chat format has them.
      if (last?.role === "assistant" && last.tool_calls && !last.content) last.tool_calls.push(call);
      else messages.push({ role: "assistant", content: null, tool_calls: [call] });
      return;
    }
    if (type === "function_call_output") {
      const callId = str(item.call_id);
      if (!callId) throw invalid(`${at}.call_id`, "is required");
      const output = typeof item.output === "string" ? item.output : partsOf(item.output, `${at}.output`);
      messages.push({ role: "tool", tool_call_id: callId, content: output });
      return;
    }
    // A reasoning model's summary sent back: not input for another model.
    if (type === "reasoning") return;
    if (type === "item_reference")
      throw invalid(
        `${at}.type`,
        "item_reference needs stored responses, which this service does not keep: send the item itself (with the AI SDK, providerOptions.openai.store = false)",
      );
    throw invalid(`${at}.type`, `input item type ${JSON.stringify(type)} is not supported (message, function_call, function_call_output)`);
  });
  if (!messages.some((message) => message.role !== "system")) throw invalid("input", "needs at least one message");
  return messages;
}

function toolChoiceOf(choice: ResponsesBodyInput["tool_choice"]): ToolChoice | undefined {
  if (choice == null) return undefined;
  if (typeof choice === "string") return choice;
  return { type: "function", function: { name: choice.name } };
}

/** A Responses request as the canonical chat request. */
export function responsesToChat(body: ResponsesBodyInput): ChatRequest {
  refuseState(body);
  const request: ChatRequest = { model: body.model, messages: inputMessages(body) };
  if (body.stream != null) request.stream = body.stream;
  if (body.temperature != null) request.temperature = body.temperature;
  if (body.top_p != null) request.top_p = body.top_p;
  if (body.max_output_tokens != null) request.max_tokens = body.max_output_tokens;
  if (body.tools?.length) {
    request.tools = body.tools.map((tool) => ({
      type: "function",
      function: {
        name: tool.name,
        ...(tool.description ? { description: tool.description } : {}),
        ...(tool.parameters ? { parameters: tool.parameters } : {}),
        ...(tool.strict != null ? { strict: tool.strict } : {}),
      },
    }));
    const choice = toolChoiceOf(body.tool_choice);
    if (choice) request.tool_choice = choice;
    if (body.parallel_tool_calls != null) request.parallel_tool_calls = body.parallel_tool_calls;
  }
  return request;
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
    store: false,
    temperature: body.temperature ?? null,
    text: { format: { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: (body.tools ?? []).map((tool) => ({ ...tool, strict: tool.strict ?? null })),
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
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
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
  return { type: "message", id, status, role: "assistant", content: text ? [{ type: "output_text", text, annotations: [] }] : [] };
}

function callItem(id: string, call: ToolCall, status = "completed"): OutputItem {
  return { type: "function_call", id, call_id: call.id, name: call.function.name, arguments: call.function.arguments, status };
}

/** A chat completion as a `response` object. */
export function toResponse(body: ResponsesBodyInput, completion: ChatCompletion) {
  const response = shell(body, itemId("resp"), Math.floor(Date.now() / 1000), completion.model);
  const choice = completion.choices[0];
  const text = choice?.message.content ?? "";
  if (text) response.output.push(messageItem(itemId("msg"), text));
  for (const call of choice?.message.tool_calls ?? []) response.output.push(callItem(itemId("fc"), call));
  if (completion.usage) response.usage = usageOf(completion.usage);
  return { ...response, ...ending(choice?.finish_reason) };
}

interface OpenItem {
  index: number;
  item: OutputItem;
  text: string;
  call?: ToolCall;
}

/**
 * Chat chunks retold as the Responses stream (docs/dialects.md "Responses"): `response.created`,
 * `response.in_progress`, then per output item `response.output_item.added`, its deltas
 * (`response.output_text.delta` in a content part, `response.function_call_arguments.delta`)
 * and their `…done` events, and last `response.completed` (or `response.incomplete`) with the
 * whole response and its usage. Every event carries a `sequence_number`.
 */
export async function* responseEvents(body: ResponsesBodyInput, chunks: AsyncIterable<ChatChunk>): AsyncGenerator<Record<string, unknown>> {
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>) => ({ type, sequence_number: sequence++, ...fields });
  const response = shell(body, itemId("resp"), Math.floor(Date.now() / 1000), body.model);
  yield event("response.created", { response: { ...response } });
  yield event("response.in_progress", { response: { ...response } });
  const items: OpenItem[] = [];
  let open: OpenItem | undefined;
  const calls = new Map<number, OpenItem>();
  let finish: FinishReason | null | undefined;
  let usage: Usage | undefined;

  function* close(item: OpenItem | undefined) {
    if (!item || item !== open) return;
    open = undefined;
    const id = item.item.id as string;
    if (item.call) {
      item.item = callItem(id, item.call);
      yield event("response.function_call_arguments.done", {
        item_id: id,
        output_index: item.index,
        name: item.call.function.name,
        arguments: item.call.function.arguments,
      });
    } else {
      const part = { type: "output_text", text: item.text, annotations: [] };
      yield event("response.output_text.done", { item_id: id, output_index: item.index, content_index: 0, text: item.text, logprobs: [] });
      yield event("response.content_part.done", { item_id: id, output_index: item.index, content_index: 0, part });
      item.item = messageItem(id, item.text);
    }
    yield event("response.output_item.done", { output_index: item.index, item: item.item });
  }

  for await (const chunk of chunks) {
    if (chunk.usage) usage = chunk.usage;
    if (typeof chunk.model === "string") response.model = chunk.model;
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    const text = choice.delta?.content;
    if (typeof text === "string" && text !== "") {
      if (!open || open.call) {
        yield* close(open);
        const id = itemId("msg");
        open = { index: items.length, item: messageItem(id, "", "in_progress"), text: "" };
        items.push(open);
        yield event("response.output_item.added", { output_index: open.index, item: open.item });
        yield event("response.content_part.added", {
          item_id: id,
          output_index: open.index,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [] },
        });
      }
      open.text += text;
      yield event("response.output_text.delta", {
        item_id: open.item.id,
        output_index: open.index,
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
        item = { index: items.length, item: callItem(itemId("fc"), call, "in_progress"), text: "", call };
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
        yield event("response.function_call_arguments.delta", { item_id: item.item.id, output_index: item.index, delta: args });
      }
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  yield* close(open);
  response.output = items.map((item) => item.item);
  if (usage) response.usage = usageOf(usage);
  const end = ending(finish);
  yield event(end.status === "completed" ? "response.completed" : "response.incomplete", { response: { ...response, ...end } });
}
