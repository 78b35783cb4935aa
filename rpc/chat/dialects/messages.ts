import { randomUUID } from "node:crypto";
import * as v from "valibot";
import { ServiceError } from "../../errors.js";
import { argumentsObject } from "../providers/shared.js";
import { countPromptTokens, countTokens } from "../tokens.js";
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
 * The Anthropic Messages API dialect (docs/dialects.md "Messages"): the reverse of the
 * Anthropic adapter (rpc/chat/providers/anthropic.ts). `system` and the content blocks are read
 * into the canonical chat request (`tool_use` blocks become tool calls, `tool_result` blocks
 * `tool` messages), so any model answers; the answer is retold as a `message` or its SSE events.
 */

const ToolName = v.pipe(
  v.string("tools[].name must be a string"),
  v.regex(/^[A-Za-z0-9_-]{1,64}$/, "tool names are 1-64 letters, digits, _ or -"),
);

const Tool = v.looseObject(
  {
    type: v.nullish(v.string("tools[].type must be a string")),
    name: ToolName,
    description: v.nullish(v.string("tools[].description must be a string")),
    input_schema: v.nullish(v.record(v.string(), v.unknown(), "tools[].input_schema must be a JSON Schema object")),
  },
  "tools[] must be {name, description, input_schema}",
);

const ToolChoiceInput = v.looseObject(
  {
    type: v.picklist(["auto", "any", "tool", "none"], 'tool_choice.type must be "auto", "any", "tool" or "none"'),
    name: v.optional(ToolName),
    disable_parallel_tool_use: v.nullish(v.boolean("tool_choice.disable_parallel_tool_use must be a boolean")),
  },
  "tool_choice must be {type}",
);

const Block = v.looseObject({ type: v.string("content blocks need a type") }, "content blocks must be objects");
const Content = v.union([v.string(), v.array(Block)], "content must be a string or an array of content blocks");

const Message = v.object(
  { role: v.picklist(["user", "assistant"], "messages[].role must be user or assistant"), content: Content },
  "messages[] must be {role, content}",
);

const Fields = {
  model: v.pipe(v.string("model must be a string"), v.minLength(1, "model must not be empty")),
  messages: v.pipe(v.array(Message, "messages must be an array"), v.minLength(1, "messages must not be empty"), v.maxLength(10_000)),
  system: v.nullish(v.union([v.string(), v.array(Block)], "system must be a string or an array of text blocks")),
  tools: v.nullish(v.pipe(v.array(Tool, "tools must be an array"), v.maxLength(128, "at most 128 tools"))),
  tool_choice: v.nullish(ToolChoiceInput),
  /** The `anthropic-version` header (docs/dialects.md): accepted, any version is answered as 2023-06-01. */
  anthropic_version: v.optional(v.pipe(v.string(), v.maxLength(64))),
};

export const MessagesBody = v.object({
  ...Fields,
  max_tokens: v.pipe(
    v.number("max_tokens must be an integer"),
    v.integer("max_tokens must be an integer"),
    v.minValue(1, "max_tokens must be at least 1"),
  ),
  stop_sequences: v.nullish(v.pipe(v.array(v.string("stop_sequences must be strings")), v.maxLength(4, "at most 4 stop_sequences"))),
  temperature: v.nullish(v.pipe(v.number("temperature must be a number"), v.minValue(0), v.maxValue(1))),
  top_p: v.nullish(v.pipe(v.number("top_p must be a number"), v.minValue(0), v.maxValue(1))),
  stream: v.nullish(v.boolean("stream must be a boolean")),
});

/** `POST …/messages/count_tokens`: the request without its generation fields. */
export const CountTokensBody = v.object(Fields);

export type MessagesBodyInput = v.InferOutput<typeof MessagesBody>;
export type CountTokensInput = v.InferOutput<typeof CountTokensBody>;
type Blocks = v.InferOutput<typeof Block>[];

function invalid(path: string, message: string): ServiceError {
  return new ServiceError("VALIDATION_FAILED", `Invalid request: ${path}: ${message}`, { details: { issues: [{ path, message }] } });
}

const str = (value: unknown) => (typeof value === "string" ? value : undefined);

/** An `image` block as a chat image part (a `data:` URL for base64 sources). */
function imagePart(block: Record<string, unknown>, at: string): ContentPart {
  const source = block.source as Record<string, unknown> | undefined;
  if (source?.type === "base64" && typeof source.data === "string" && typeof source.media_type === "string")
    return { type: "image_url", image_url: { url: `data:${source.media_type};base64,${source.data}` } };
  if (source?.type === "url" && typeof source.url === "string") return { type: "image_url", image_url: { url: source.url } };
  throw invalid(`${at}.source`, "an image source is {type: base64, media_type, data} or {type: url, url}");
}

/** Text and images of a block list as chat content: one string when it is only text. */
function contentOf(blocks: string | Blocks, at: string): string | ContentPart[] {
  if (typeof blocks === "string") return blocks;
  if (!Array.isArray(blocks)) throw invalid(at, "must be a string or an array of content blocks");
  const parts: ContentPart[] = [];
  blocks.forEach((block, index) => {
    if (typeof block !== "object" || block === null) throw invalid(`${at}.${index}`, "content blocks must be objects");
    if (block.type === "text") {
      if (typeof block.text !== "string") throw invalid(`${at}.${index}.text`, "must be a string");
      parts.push({ type: "text", text: block.text });
    } else if (block.type === "image") parts.push(imagePart(block, `${at}.${index}`));
    else if (block.type !== "thinking" && block.type !== "redacted_thinking")
      throw invalid(`${at}.${index}.type`, `content block type ${JSON.stringify(block.type)} is not supported here (text, image)`);
  });
  return parts.every((part) => part.type === "text") ? parts.map((part) => part.text as string).join("") : parts;
}

function systemOf(system: MessagesBodyInput["system"]): string | undefined {
  if (system == null) return undefined;
  if (typeof system === "string") return system || undefined;
  return (
    system
      .map((block, index) => {
        if (block.type !== "text" || typeof block.text !== "string") throw invalid(`system.${index}`, "system blocks are text blocks");
        return block.text;
      })
      .join("\n\n") || undefined
  );
}

/**
 * The messages as chat messages: a user turn's `tool_result` blocks become `tool` messages
 * (first, answering the assistant turn before), its text and images one user message; an
 * assistant turn's `tool_use` blocks become its tool calls. Thinking blocks are dropped.
 */
function chatMessages(body: CountTokensInput): ChatMessage[] {
  const messages: ChatMessage[] = [];
  const system = systemOf(body.system);
  if (system) messages.push({ role: "system", content: system });
  body.messages.forEach((message, index) => {
    const at = `messages.${index}.content`;
    if (typeof message.content === "string") {
      messages.push({ role: message.role, content: message.content });
      return;
    }
    const rest: Blocks = [];
    const calls: ToolCall[] = [];
    message.content.forEach((block, blockIndex) => {
      const where = `${at}.${blockIndex}`;
      if (block.type === "tool_result") {
        if (message.role !== "user") throw invalid(where, "tool_result blocks are in user messages");
        const id = str(block.tool_use_id);
        if (!id) throw invalid(`${where}.tool_use_id`, "is required");
        const content = block.content == null ? "" : contentOf(block.content as string | Blocks, `${where}.content`);
        // The chat format has no error flag on a tool result: the text says it.
        messages.push({
          role: "tool",
          tool_call_id: id,
          content: block.is_error === true && typeof content === "string" ? `Error: ${content}` : content,
        });
      } else if (block.type === "tool_use") {
        if (message.role !== "assistant") throw invalid(where, "tool_use blocks are in assistant messages");
        const id = str(block.id);
        const name = str(block.name);
        if (!id) throw invalid(`${where}.id`, "is required");
        if (!name || !/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw invalid(`${where}.name`, "tool names are 1-64 letters, digits, _ or -");
        calls.push({ id, type: "function", function: { name, arguments: JSON.stringify(block.input ?? {}) } });
      } else rest.push(block);
    });
    const content = rest.length ? contentOf(rest, at) : "";
    if (message.role === "assistant") {
      if (content || calls.length)
        messages.push({ role: "assistant", content: content || null, ...(calls.length ? { tool_calls: calls } : {}) });
    } else if (content) messages.push({ role: "user", content });
  });
  if (!messages.some((message) => message.role !== "system")) throw invalid("messages", "needs at least one message with content");
  return messages;
}

function toolsOf(body: CountTokensInput): Pick<ChatRequest, "tools" | "tool_choice" | "parallel_tool_calls"> {
  if (!body.tools?.length) return {};
  const tools = body.tools.map((tool, index) => {
    // Anthropic's server tools (web search, code execution…) run on Anthropic's side only.
    if (tool.type != null && tool.type !== "custom")
      throw invalid(
        `tools.${index}.type`,
        `${tool.type} is a server tool this service does not run; only custom tools (name, input_schema)`,
      );
    return {
      type: "function" as const,
      function: {
        name: tool.name,
        ...(tool.description ? { description: tool.description } : {}),
        parameters: tool.input_schema ?? { type: "object", properties: {} },
      },
    };
  });
  const out: Pick<ChatRequest, "tools" | "tool_choice" | "parallel_tool_calls"> = { tools };
  const choice = body.tool_choice;
  if (choice) {
    const map: Record<string, ToolChoice> = { auto: "auto", any: "required", none: "none" };
    if (choice.type === "tool") {
      if (!choice.name) throw invalid("tool_choice.name", 'is required with type "tool"');
      out.tool_choice = { type: "function", function: { name: choice.name } };
    } else out.tool_choice = map[choice.type]!;
    if (choice.disable_parallel_tool_use === true) out.parallel_tool_calls = false;
  }
  return out;
}

/** A Messages request as the canonical chat request. */
export function messagesToChat(body: MessagesBodyInput): ChatRequest {
  const request: ChatRequest = { model: body.model, messages: chatMessages(body), max_tokens: body.max_tokens, ...toolsOf(body) };
  if (body.stream != null) request.stream = body.stream;
  if (body.temperature != null) request.temperature = body.temperature;
  if (body.top_p != null) request.top_p = body.top_p;
  if (body.stop_sequences?.length) request.stop = body.stop_sequences;
  return request;
}

/**
 * `input_tokens` of a request as the service counts them (rpc/chat/tokens.ts, the count its
 * holds use), plus the tool definitions: the same deterministic count whatever the model.
 */
export function countInputTokens(body: CountTokensInput): { request: ChatRequest; inputTokens: number } {
  const request: ChatRequest = { model: body.model, messages: chatMessages(body), ...toolsOf(body) };
  const tools = request.tools?.length ? countTokens(JSON.stringify(request.tools)) : 0;
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

function usageOf(usage: Usage | undefined, estimate: number) {
  return {
    input_tokens: usage?.prompt_tokens ?? estimate,
    output_tokens: usage?.completion_tokens ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
  };
}

const messageId = () => `msg_${randomUUID().replaceAll("-", "")}`;

/** A chat completion as a Messages API `message`. */
export function toMessage(completion: ChatCompletion, request: ChatRequest) {
  const choice = completion.choices[0];
  const content: { type: string; [field: string]: unknown }[] = [];
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
 * Chat chunks retold as the Messages stream (docs/dialects.md "Messages"): `message_start`
 * (its `input_tokens` the service's count until the model's own arrives), `ping`, then per
 * content block `content_block_start`, its `text_delta` or `input_json_delta` deltas and
 * `content_block_stop`, and last `message_delta` (stop reason and the model's usage, input
 * tokens included) and `message_stop`.
 */
export async function* messageEvents(request: ChatRequest, chunks: AsyncIterable<ChatChunk>): AsyncGenerator<Record<string, unknown>> {
  const estimate = countPromptTokens(request.messages);
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
      usage: usageOf(undefined, estimate),
    },
  };
  yield { type: "ping" };
  let index = -1;
  let open: "text" | number | undefined;
  let finish: FinishReason | null | undefined;
  let usage: Usage | undefined;
  /** Tool call index → its content block, and whether its arguments have started. */
  const tools = new Map<number, { block: number; argued: boolean }>();
  const close = function* () {
    if (open === undefined) return;
    // A tool whose arguments never came has input {}, as in a JSON answer.
    if (typeof open === "number") {
      const tool = [...tools.values()].find((entry) => entry.block === open);
      if (tool && !tool.argued) yield { type: "content_block_delta", index: open, delta: { type: "input_json_delta", partial_json: "{}" } };
    }
    yield { type: "content_block_stop", index: typeof open === "number" ? open : index };
    open = undefined;
  };
  for await (const chunk of chunks) {
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    const text = choice.delta?.content;
    if (typeof text === "string" && text !== "") {
      if (open !== "text") {
        yield* close();
        index += 1;
        open = "text";
        yield { type: "content_block_start", index, content_block: { type: "text", text: "" } };
      }
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
  yield* close();
  yield {
    type: "message_delta",
    delta: { stop_reason: stopReason(finish), stop_sequence: null },
    usage: usageOf(usage, estimate),
  };
  yield { type: "message_stop" };
}
