import { randomUUID } from "node:crypto";
import * as v from "valibot";
import { ServiceError } from "../../errors.js";
import { nativeOf } from "../native.js";
import { argumentsObject } from "../providers/shared.js";
import { effortOf } from "../translate/reasoning.js";
import { countPromptTokens, countTokens } from "../tokens.js";
import type {
  ChatChunk,
  ChatCompletion,
  ChatMessage,
  ChatRequest,
  ContentPart,
  FinishReason,
  ReasoningEffort,
  SourceRequest,
  ToolCall,
  ToolChoice,
  ToolSpec,
  Usage,
} from "../types.js";

/**
 * The Anthropic Messages API dialect (docs/dialects.md "Messages"), read tolerantly: the fields
 * the gateway acts on are validated, every other one is kept. To an Anthropic model the request
 * goes as it came (only the model id changed), and its answer comes back as Anthropic sent it.
 * To any other model it is read into the canonical chat request (`system` messages anywhere,
 * `tool_use` blocks as tool calls, `tool_result` blocks as `tool` messages, `thinking` and
 * `output_config` as reasoning effort and structured output) and the answer is retold as a
 * `message` or its SSE events. What has no canonical form is refused (400 naming it) or dropped
 * with a warning, as docs/dialects.md's matrix says, only when translating.
 */

const Block = v.looseObject({ type: v.string("content blocks need a type") }, "content blocks must be objects");
const Content = v.union([v.string(), v.array(Block)], "content must be a string or an array of content blocks");

const Message = v.looseObject(
  { role: v.pipe(v.string("messages[].role must be a string"), v.minLength(1)), content: Content },
  "messages[] must be {role, content}",
);

const Tool = v.looseObject(
  {
    type: v.nullish(v.string("tools[].type must be a string")),
    name: v.pipe(v.string("tools[].name must be a string"), v.minLength(1, "tools[].name must not be empty")),
    description: v.nullish(v.string("tools[].description must be a string")),
    input_schema: v.nullish(v.record(v.string(), v.unknown(), "tools[].input_schema must be a JSON Schema object")),
  },
  "tools[] must be {name, description, input_schema}",
);

const ToolChoiceInput = v.looseObject(
  {
    type: v.string("tool_choice.type must be a string"),
    name: v.optional(v.string("tool_choice.name must be a string")),
    disable_parallel_tool_use: v.nullish(v.boolean("tool_choice.disable_parallel_tool_use must be a boolean")),
  },
  "tool_choice must be {type}",
);

const Fields = {
  model: v.pipe(v.string("model must be a string"), v.minLength(1, "model must not be empty")),
  messages: v.pipe(v.array(Message, "messages must be an array"), v.minLength(1, "messages must not be empty"), v.maxLength(10_000)),
  system: v.nullish(v.union([v.string(), v.array(Block)], "system must be a string or an array of text blocks")),
  tools: v.nullish(v.pipe(v.array(Tool, "tools must be an array"), v.maxLength(1024, "at most 1024 tools"))),
  tool_choice: v.nullish(ToolChoiceInput),
  thinking: v.nullish(v.looseObject({ type: v.string("thinking.type must be a string"), budget_tokens: v.optional(v.number()) })),
  output_config: v.nullish(v.looseObject({}, "output_config must be an object")),
  output_format: v.nullish(v.looseObject({ type: v.string() }, "output_format must be an object")),
  /** The `anthropic-version` header (docs/dialects.md): any version is accepted; answers follow 2023-06-01 unless forwarded. */
  anthropic_version: v.optional(v.pipe(v.string(), v.maxLength(64))),
  /** The `anthropic-beta` header: forwarded to an Anthropic upstream with the request. */
  anthropic_beta: v.optional(v.pipe(v.string(), v.maxLength(4096))),
  /** The query's `beta` (the SDK's `?beta=true`), forwarded to an Anthropic upstream with the request. */
  anthropic_beta_query: v.optional(v.pipe(v.string(), v.maxLength(16))),
};

export const MessagesBody = v.looseObject({
  ...Fields,
  max_tokens: v.pipe(
    v.number("max_tokens must be an integer"),
    v.integer("max_tokens must be an integer"),
    v.minValue(1, "max_tokens must be at least 1"),
  ),
  stop_sequences: v.nullish(v.array(v.string("stop_sequences must be strings"), "stop_sequences must be an array of strings")),
  temperature: v.nullish(v.pipe(v.number("temperature must be a number"), v.minValue(0), v.maxValue(1))),
  top_p: v.nullish(v.pipe(v.number("top_p must be a number"), v.minValue(0), v.maxValue(1))),
  top_k: v.nullish(v.pipe(v.number("top_k must be an integer"), v.integer("top_k must be an integer"), v.minValue(0))),
  stream: v.nullish(v.boolean("stream must be a boolean")),
  metadata: v.nullish(v.looseObject({ user_id: v.nullish(v.string("metadata.user_id must be a string")) })),
});

/** `POST …/messages/count_tokens`: the request without its generation fields. */
export const CountTokensBody = v.looseObject(Fields);

export type MessagesBodyInput = v.InferOutput<typeof MessagesBody>;
export type CountTokensInput = v.InferOutput<typeof CountTokensBody>;
type Blocks = v.InferOutput<typeof Block>[];

/** Fields of a Messages request the canonical request has a place for; the rest are `untranslated`. */
const READ = new Set([
  "model",
  "messages",
  "system",
  "tools",
  "tool_choice",
  "thinking",
  "output_config",
  "output_format",
  "anthropic_version",
  "anthropic_beta",
  "anthropic_beta_query",
  "max_tokens",
  "stop_sequences",
  "temperature",
  "top_p",
  "top_k",
  "stream",
  "metadata",
]);

/** Block types of server tools' work in a conversation: dropped with a warning when translating. */
const SERVER_BLOCK = /^(server_tool_use|mcp_tool_use|mcp_tool_result|container_upload|.+_tool_result)$/;

function invalid(path: string, message: string): ServiceError {
  return new ServiceError("VALIDATION_FAILED", `Invalid request: ${path}: ${message}`, { details: { issues: [{ path, message }] } });
}

const str = (value: unknown) => (typeof value === "string" ? value : undefined);

/** The reading of one request: what it could not put in canonical form, for the translating adapters. */
class Reading {
  readonly unreadable: { path: string; message: string }[] = [];
  readonly untranslated: string[] = [];
  readonly serverTools: { path: string; type: string }[] = [];

  cannot(path: string, message: string): void {
    this.unreadable.push({ path, message });
  }
}

/** An `image` block as a chat image part (a `data:` URL for base64 sources). */
function imagePart(block: Record<string, unknown>, at: string, reading: Reading): ContentPart | undefined {
  const source = block.source as Record<string, unknown> | undefined;
  if (source?.type === "base64" && typeof source.data === "string" && typeof source.media_type === "string")
    return { type: "image_url", image_url: { url: `data:${source.media_type};base64,${source.data}` } };
  if (source?.type === "url" && typeof source.url === "string") return { type: "image_url", image_url: { url: source.url } };
  reading.cannot(`${at}.source`, "an image source is {type: base64, media_type, data} or {type: url, url} for this model");
  return undefined;
}

/** A `document` block: a base64 PDF as a file part, plain text as text. */
function documentPart(block: Record<string, unknown>, at: string, reading: Reading): ContentPart | undefined {
  const source = block.source as Record<string, unknown> | undefined;
  if (source?.type === "base64" && typeof source.data === "string" && typeof source.media_type === "string")
    return {
      type: "file",
      file: { file_data: `data:${source.media_type};base64,${source.data}`, ...(str(block.title) ? { filename: block.title } : {}) },
    };
  if (source?.type === "text" && typeof source.data === "string") return { type: "text", text: source.data };
  reading.cannot(`${at}.source`, "a document for this model is a base64 PDF or plain text");
  return undefined;
}

/** Text, images and documents of a block list as chat content: one string when it is only text. */
function contentOf(blocks: string | Blocks, at: string, reading: Reading): string | ContentPart[] {
  if (typeof blocks === "string") return blocks;
  if (!Array.isArray(blocks)) {
    reading.cannot(at, "must be a string or an array of content blocks");
    return "";
  }
  const parts: ContentPart[] = [];
  for (const [index, block] of blocks.entries()) {
    const where = `${at}.${index}`;
    if (typeof block !== "object" || block === null) {
      reading.cannot(where, "content blocks must be objects");
      continue;
    }
    let part: ContentPart | undefined;
    if (block.type === "text") {
      if (typeof block.text !== "string") {
        reading.cannot(`${where}.text`, "must be a string");
        continue;
      }
      part = { type: "text", text: block.text };
    } else if (block.type === "image") part = imagePart(block, where, reading);
    else if (block.type === "document") part = documentPart(block, where, reading);
    else if (block.type === "thinking" || block.type === "redacted_thinking") continue;
    else if (SERVER_BLOCK.test(block.type)) {
      reading.serverTools.push({ path: where, type: block.type });
      continue;
    } else {
      reading.cannot(`${where}.type`, `content block type ${JSON.stringify(block.type)} has no equivalent for this model`);
      continue;
    }
    if (part) parts.push(part);
  }
  return parts.every((part) => part.type === "text") ? parts.map((part) => part.text as string).join("") : parts;
}

function systemText(system: string | Blocks, at: string, reading: Reading): string {
  if (typeof system === "string") return system;
  return system
    .map((block, index) => {
      if (block.type !== "text" || typeof block.text !== "string") {
        reading.cannot(`${at}.${index}`, "system blocks are text blocks");
        return "";
      }
      return block.text;
    })
    .filter(Boolean)
    .join("\n\n");
}

/**
 * The messages as chat messages: `system` (top level, and `system` turns where they are), a user
 * turn's `tool_result` blocks as `tool` messages (first, answering the assistant turn before),
 * its text, images and documents one user message; an assistant turn's `tool_use` blocks as its
 * tool calls. Thinking blocks are the answering model's own and stay out.
 */
function chatMessages(body: CountTokensInput, reading: Reading): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (body.system != null) {
    const system = systemText(body.system, "system", reading);
    if (system) messages.push({ role: "system", content: system });
  }
  for (const [index, message] of body.messages.entries()) {
    const at = `messages.${index}`;
    if (message.role === "system") {
      const text = systemText(message.content, `${at}.content`, reading);
      if (text) messages.push({ role: "system", content: text });
      continue;
    }
    if (message.role !== "user" && message.role !== "assistant") {
      reading.cannot(`${at}.role`, "must be user, assistant or system for this model");
      continue;
    }
    if (typeof message.content === "string") {
      messages.push({ role: message.role, content: message.content });
      continue;
    }
    const rest: Blocks = [];
    const calls: ToolCall[] = [];
    for (const [blockIndex, block] of message.content.entries()) {
      const where = `${at}.content.${blockIndex}`;
      if (block.type === "tool_result") {
        if (message.role !== "user") {
          reading.cannot(where, "tool_result blocks are in user messages");
          continue;
        }
        const id = str(block.tool_use_id);
        if (!id) {
          reading.cannot(`${where}.tool_use_id`, "is required");
          continue;
        }
        const content = block.content == null ? "" : contentOf(block.content as string | Blocks, `${where}.content`, reading);
        // The chat format has no error flag on a tool result: the text says it.
        messages.push({
          role: "tool",
          tool_call_id: id,
          content: block.is_error === true && typeof content === "string" ? `Error: ${content}` : content,
        });
      } else if (block.type === "tool_use") {
        if (message.role !== "assistant") {
          reading.cannot(where, "tool_use blocks are in assistant messages");
          continue;
        }
        const id = str(block.id);
        const name = str(block.name);
        if (!id) {
          reading.cannot(`${where}.id`, "is required");
          continue;
        }
        if (!name || !/^[A-Za-z0-9_-]{1,64}$/.test(name)) {
          reading.cannot(`${where}.name`, "tool names are 1-64 letters, digits, _ or -");
          continue;
        }
        calls.push({ id, type: "function", function: { name, arguments: JSON.stringify(block.input ?? {}) } });
      } else rest.push(block);
    }
    const content = rest.length ? contentOf(rest, `${at}.content`, reading) : "";
    if (message.role === "assistant") {
      if (content || calls.length)
        messages.push({ role: "assistant", content: content || null, ...(calls.length ? { tool_calls: calls } : {}) });
    } else if (content) messages.push({ role: "user", content });
  }
  if (!messages.some((message) => message.role !== "system") && !reading.unreadable.length)
    throw invalid("messages", "needs at least one message with content");
  return messages;
}

function toolsOf(body: CountTokensInput, reading: Reading): Pick<ChatRequest, "tools" | "tool_choice" | "parallel_tool_calls"> {
  const tools: ToolSpec[] = [];
  for (const [index, tool] of (body.tools ?? []).entries()) {
    // Anthropic's own tools (web search, code execution, bash, text editor…) have a type; custom tools have none.
    if (tool.type != null && tool.type !== "custom") {
      reading.serverTools.push({ path: `tools.${index}`, type: tool.type });
      continue;
    }
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(tool.name)) {
      reading.cannot(`tools.${index}.name`, "tool names are 1-64 letters, digits, _ or - for this model");
      continue;
    }
    tools.push({
      type: "function",
      function: {
        name: tool.name,
        ...(tool.description ? { description: tool.description } : {}),
        parameters: tool.input_schema ?? { type: "object", properties: {} },
      },
    });
  }
  const choice = body.tool_choice;
  const map: Record<string, ToolChoice> = { auto: "auto", any: "required", none: "none" };
  if (choice && choice.type !== "tool" && !map[choice.type])
    reading.cannot("tool_choice.type", 'must be "auto", "any", "tool" or "none" for this model');
  if (choice?.type === "tool" && !choice.name) throw invalid("tool_choice.name", 'is required with type "tool"');
  if (!tools.length) return {};
  const out: Pick<ChatRequest, "tools" | "tool_choice" | "parallel_tool_calls"> = { tools };
  if (choice) {
    if (choice.type === "tool") out.tool_choice = { type: "function", function: { name: choice.name! } };
    else if (map[choice.type]) out.tool_choice = map[choice.type]!;
    if (choice.disable_parallel_tool_use === true) out.parallel_tool_calls = false;
  }
  return out;
}

/** `thinking` and `output_config.effort` as the canonical effort and budget. */
function reasoningOf(body: CountTokensInput, reading: Reading): Pick<ChatRequest, "reasoning_effort" | "reasoning_budget"> {
  const effort = str((body.output_config as { effort?: unknown } | null | undefined)?.effort) as ReasoningEffort | undefined;
  const thinking = body.thinking;
  if (thinking?.type === "disabled") return { reasoning_effort: "none" };
  if (thinking?.type === "enabled" && typeof thinking.budget_tokens === "number")
    return { reasoning_effort: effort ?? effortOf(thinking.budget_tokens), reasoning_budget: thinking.budget_tokens };
  if (thinking && thinking.type !== "adaptive" && thinking.type !== "enabled") reading.untranslated.push("thinking");
  // Adaptive thinking without an effort leaves it to the model, as an unset effort does.
  return effort ? { reasoning_effort: effort } : {};
}

/** `output_config.format` (or the earlier `output_format`) as `response_format`. */
function formatOf(body: CountTokensInput, reading: Reading): Pick<ChatRequest, "response_format"> {
  const format = ((body.output_config as { format?: unknown } | null | undefined)?.format ?? body.output_format) as
    | { type?: unknown; schema?: unknown }
    | null
    | undefined;
  if (format == null) return {};
  if (format.type !== "json_schema" || !format.schema || typeof format.schema !== "object") {
    reading.cannot("output_config.format", 'is {type: "json_schema", schema} for this model');
    return {};
  }
  // Not `strict`: a schema written for Anthropic need not meet OpenAI's strict rules (additionalProperties false everywhere).
  return { response_format: { type: "json_schema", json_schema: { name: "output", schema: format.schema as Record<string, unknown> } } };
}

/** The request headers a same-dialect upstream gets (docs/dialects.md "Messages"). */
function headersOf(body: CountTokensInput): Record<string, string> | undefined {
  const headers: Record<string, string> = {};
  if (body.anthropic_beta) headers["anthropic-beta"] = body.anthropic_beta;
  if (body.anthropic_version) headers["anthropic-version"] = body.anthropic_version;
  return Object.keys(headers).length ? headers : undefined;
}

/** The body as the client sent it (the header params taken out), for an Anthropic upstream. */
function sourceOf(body: CountTokensInput, reading: Reading): SourceRequest {
  const { anthropic_version: _version, anthropic_beta: _beta, anthropic_beta_query: beta, ...sent } = body;
  for (const field of Object.keys(sent)) if (!READ.has(field)) reading.untranslated.push(field);
  const headers = headersOf(body);
  return {
    dialect: "messages",
    body: sent,
    ...(headers ? { headers } : {}),
    ...(beta === "true" ? { query: "beta=true" } : {}),
    untranslated: reading.untranslated,
    serverTools: reading.serverTools,
    unreadable: reading.unreadable,
  };
}

/** A Messages request as the canonical request, with the request itself as `source`. */
export function messagesToChat(body: MessagesBodyInput): ChatRequest {
  const reading = new Reading();
  const request: ChatRequest = {
    model: body.model,
    messages: chatMessages(body, reading),
    max_tokens: body.max_tokens,
    ...toolsOf(body, reading),
    ...reasoningOf(body, reading),
    ...formatOf(body, reading),
  };
  if (body.stream != null) request.stream = body.stream;
  if (body.temperature != null) request.temperature = body.temperature;
  if (body.top_p != null) request.top_p = body.top_p;
  if (body.top_k != null) request.top_k = body.top_k;
  if (body.stop_sequences?.length) request.stop = body.stop_sequences;
  if (body.metadata?.user_id) request.user = body.metadata.user_id;
  request.source = sourceOf(body, reading);
  return request;
}

/**
 * `input_tokens` of a request as the service counts them (rpc/chat/tokens.ts, the count its
 * holds use), plus the tool definitions: the same deterministic count whatever the model.
 */
export function countInputTokens(body: CountTokensInput): { request: ChatRequest; inputTokens: number } {
  const reading = new Reading();
  const request: ChatRequest = { model: body.model, messages: chatMessages(body, reading), ...toolsOf(body, reading) };
  const tools = body.tools?.length ? countTokens(JSON.stringify(body.tools)) : 0;
  return { request, inputTokens: countPromptTokens(request.messages) + tools };
}

/** `finish_reason` → `stop_reason` (docs/dialects.md "Messages"; the reverse of rpc/chat/providers/anthropic.ts). */
function stopReason(finish: FinishReason | null | undefined): string {
  switch (finish) {
    case "length":
      return "max_tokens";
    case "tool_calls":
      return "tool_use";
    case "content_filter":
      return "refusal";
    default:
      return "end_turn";
  }
}

/** Usage in the Messages API's terms: `input_tokens` are the prompt tokens not read from or written to the cache. */
function usageOf(usage: Usage | undefined, estimate: number) {
  const prompt = usage?.prompt_tokens ?? estimate;
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
  const created = usage?.prompt_tokens_details?.cache_creation_tokens ?? 0;
  return {
    input_tokens: Math.max(0, prompt - cached - created),
    output_tokens: usage?.completion_tokens ?? 0,
    cache_creation_input_tokens: created,
    cache_read_input_tokens: cached,
  };
}

const messageId = () => `msg_${randomUUID().replaceAll("-", "")}`;

/** A chat completion as a Messages API `message`: an Anthropic upstream's own, or retold. */
export function toMessage(completion: ChatCompletion, request: ChatRequest): RetoldMessage {
  const native = nativeOf(completion, "messages")?.body;
  if (native) return { ...native, model: completion.model } as unknown as RetoldMessage;
  return retoldMessage(completion, request);
}

type RetoldMessage = ReturnType<typeof retoldMessage>;

function retoldMessage(completion: ChatCompletion, request: ChatRequest) {
  const choice = completion.choices[0];
  const content: { type: string; [field: string]: unknown }[] = [];
  if (choice?.message.reasoning_content) content.push({ type: "thinking", thinking: choice.message.reasoning_content, signature: "" });
  if (choice?.message.content) content.push({ type: "text", text: choice.message.content });
  for (const call of choice?.message.tool_calls ?? [])
    content.push({ type: "tool_use", id: call.id, name: call.function.name, input: argumentsObject(call.function.arguments) });
  return {
    id: messageId(),
    type: "message",
    role: "assistant",
    model: completion.model,
    content,
    stop_reason: stopReason(choice?.finish_reason),
    stop_sequence: null,
    usage: usageOf(completion.usage, countPromptTokens(request.messages)),
  };
}

/**
 * Chat chunks as the Messages stream (docs/dialects.md "Messages"). From an Anthropic upstream,
 * the events it sent, with the model id the client asked for. Otherwise retold: `message_start`
 * once the model's first chunk is in (with the model's own prompt count when it gave one so far,
 * the service's until then), `ping`, then per content block `content_block_start`, its deltas
 * (`thinking_delta`, `text_delta`, `input_json_delta`) and `content_block_stop`, and last
 * `message_delta` (stop reason and the model's usage, input tokens included) and `message_stop`.
 */
export async function* messageEvents(request: ChatRequest, chunks: AsyncIterable<ChatChunk>): AsyncGenerator<Record<string, unknown>> {
  const estimate = countPromptTokens(request.messages);
  let index = -1;
  let open: "text" | "thinking" | number | undefined;
  let finish: FinishReason | null | undefined;
  let usage: Usage | undefined;
  let started = false;
  /** Tool call index → its content block, and whether its arguments have started. */
  const tools = new Map<number, { block: number; argued: boolean }>();
  const close = function* () {
    if (open === undefined) return;
    // A tool whose arguments never came has input {}, as in a JSON answer.
    if (typeof open === "number") {
      const tool = [...tools.values()].find((entry) => entry.block === open);
      if (tool && !tool.argued) yield { type: "content_block_delta", index: open, delta: { type: "input_json_delta", partial_json: "{}" } };
    }
    if (open === "thinking") yield { type: "content_block_delta", index, delta: { type: "signature_delta", signature: "" } };
    yield { type: "content_block_stop", index: typeof open === "number" ? open : index };
    open = undefined;
  };
  const opening = (kind: "text" | "thinking", block: Record<string, unknown>) =>
    function* () {
      if (open === kind) return;
      yield* close();
      index += 1;
      open = kind;
      yield { type: "content_block_start", index, content_block: block };
    };
  /** The upstream speaks Messages: its events are relayed, nothing is retold. */
  let native = false;
  const start = function* () {
    if (started) return;
    started = true;
    yield {
      type: "message_start",
      message: {
        id: messageId(),
        type: "message",
        role: "assistant",
        model: request.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usageOf(usage, estimate), output_tokens: 0 },
      },
    };
    yield { type: "ping" };
  };
  for await (const chunk of chunks) {
    const events = nativeOf(chunk, "messages")?.events;
    if (events) {
      native = true;
      for (const event of events)
        yield event.type === "message_start" ? { ...event, message: { ...(event.message as object), model: request.model } } : event;
      continue;
    }
    if (chunk.usage) usage = chunk.usage;
    yield* start();
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    const thinking = choice.delta?.reasoning_content;
    if (typeof thinking === "string" && thinking !== "") {
      yield* opening("thinking", { type: "thinking", thinking: "", signature: "" })();
      yield { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking } };
    }
    const text = choice.delta?.content;
    if (typeof text === "string" && text !== "") {
      yield* opening("text", { type: "text", text: "" })();
      yield { type: "content_block_delta", index, delta: { type: "text_delta", text } };
    }
    for (const delta of choice.delta?.tool_calls ?? []) {
      const key = delta.index ?? 0;
      let tool = tools.get(key);
      if (!tool) {
        yield* close();
        index += 1;
        tool = { block: index, argued: false };
        tools.set(key, tool);
        open = index;
        yield {
          type: "content_block_start",
          index,
          content_block: {
            type: "tool_use",
            id: delta.id ?? `toolu_${randomUUID().replaceAll("-", "")}`,
            name: delta.function?.name ?? "",
            input: {},
          },
        };
      }
      const args = delta.function?.arguments;
      if (args) {
        tool.argued = true;
        yield { type: "content_block_delta", index: tool.block, delta: { type: "input_json_delta", partial_json: args } };
      }
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  if (native) return;
  yield* start();
  yield* close();
  yield { type: "message_delta", delta: { stop_reason: stopReason(finish), stop_sequence: null }, usage: usageOf(usage, estimate) };
  yield { type: "message_stop" };
}
