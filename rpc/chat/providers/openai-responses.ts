import { randomUUID } from "node:crypto";
import { withNative } from "../native.js";
import { applyMatrix, type Translation } from "../translate/matrix.js";
import type { ChatChunk, ChatCompletion, ChatMessage, ChatRequest, ContentPart, FinishReason, ToolCall, Usage } from "../types.js";
import { ProviderError, isRetryableStatus, messageOf } from "./provider-error.js";
import { ChunkFrames, imageUrlOf, invalidAnswer, streamCut, textOf, type UpstreamEventHandlers } from "./shared.js";

/**
 * An upstream of OpenAI's Responses API (`apis: ["responses"]`, docs/providers.md): a Responses
 * request is forwarded as it came; any other is translated to one. The answer is read into chat
 * chunks for metering, limits and tracing, and keeps what the upstream sent for a Responses
 * client (rpc/chat/native.ts).
 */

type Item = Record<string, unknown>;

/** Content parts as Responses input parts (`input_*` in user turns, `output_text` in assistant turns). */
function partsOf(message: ChatMessage): string | Item[] {
  if (typeof message.content === "string" || message.content === null) return message.content ?? "";
  const assistant = message.role === "assistant";
  return message.content.flatMap((part: ContentPart): Item[] => {
    if (part.type === "text" && typeof part.text === "string") return [{ type: assistant ? "output_text" : "input_text", text: part.text }];
    const url = imageUrlOf(part);
    if (url) return [{ type: "input_image", image_url: url }];
    const file = part.file as { file_data?: unknown; filename?: unknown } | undefined;
    if (part.type === "file" && typeof file?.file_data === "string")
      return [{ type: "input_file", file_data: file.file_data, ...(typeof file.filename === "string" ? { filename: file.filename } : {}) }];
    return [];
  });
}

/** The canonical request as a Responses body (stateless: `store: false`). */
export function responsesRequest(request: ChatRequest, model: string, t: Translation): Record<string, unknown> {
  const r = applyMatrix(request, t);
  const input: Item[] = [];
  for (const message of r.messages) {
    if (message.role === "tool") {
      input.push({ type: "function_call_output", call_id: message.tool_call_id ?? "", output: textOf(message.content) });
      continue;
    }
    const role = message.role === "developer" ? "system" : message.role;
    const content = partsOf(message);
    if (content.length) input.push({ role, content });
    for (const call of message.tool_calls ?? [])
      input.push({ type: "function_call", call_id: call.id, name: call.function.name, arguments: call.function.arguments });
  }
  const body: Record<string, unknown> = { model, input, store: false };
  if (r.stream) body.stream = true;
  if (r.temperature !== undefined) body.temperature = r.temperature;
  if (r.top_p !== undefined) body.top_p = r.top_p;
  if (r.max_tokens !== undefined) body.max_output_tokens = r.max_tokens;
  if (r.user !== undefined) body.safety_identifier = r.user;
  if (r.metadata !== undefined) body.metadata = r.metadata;
  // A summary is asked for so the reasoning text reaches the client (the API gives none otherwise).
  if (r.reasoning_effort !== undefined) body.reasoning = { effort: r.reasoning_effort, summary: "auto" };
  const format = r.response_format;
  if (format && format.type !== "text")
    body.text = {
      format:
        format.type === "json_object"
          ? { type: "json_object" }
          : {
              type: "json_schema",
              name: format.json_schema.name,
              schema: format.json_schema.schema ?? { type: "object" },
              ...(format.json_schema.strict != null ? { strict: format.json_schema.strict } : {}),
              ...(format.json_schema.description ? { description: format.json_schema.description } : {}),
            },
    };
  if (r.tools?.length) {
    body.tools = r.tools.map((tool) => ({
      type: "function",
      name: tool.function.name,
      ...(tool.function.description ? { description: tool.function.description } : {}),
      parameters: tool.function.parameters ?? { type: "object", properties: {} },
      strict: tool.function.strict ?? false,
    }));
    const choice = r.tool_choice;
    if (choice) body.tool_choice = typeof choice === "string" ? choice : { type: "function", name: choice.function.name };
    if (r.parallel_tool_calls !== undefined) body.parallel_tool_calls = r.parallel_tool_calls;
  }
  return body;
}

interface ResponsesUsage {
  input_tokens?: number;
  output_tokens?: number;
  input_tokens_details?: { cached_tokens?: number };
  output_tokens_details?: { reasoning_tokens?: number };
}

function usageOf(usage: ResponsesUsage | undefined): Usage | undefined {
  if (!usage) return undefined;
  const prompt = usage.input_tokens ?? 0;
  const completion = usage.output_tokens ?? 0;
  const out: Usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  if (usage.input_tokens_details?.cached_tokens) out.prompt_tokens_details = { cached_tokens: usage.input_tokens_details.cached_tokens };
  if (usage.output_tokens_details?.reasoning_tokens)
    out.completion_tokens_details = { reasoning_tokens: usage.output_tokens_details.reasoning_tokens };
  return out;
}

/** A response's status as a finish reason: incomplete by the cap is `length`, a turn of calls `tool_calls`. */
function finishOf(response: Item, called: boolean): FinishReason {
  const reason = (response.incomplete_details as { reason?: unknown } | null | undefined)?.reason;
  if (response.status === "incomplete") return reason === "content_filter" ? "content_filter" : "length";
  return called ? "tool_calls" : "stop";
}

/** A call item's canonical name: a namespaced function as `<namespace>__<name>`, as the Responses dialect names them. */
function callName(item: Item): string {
  return typeof item.namespace === "string" ? `${item.namespace}__${String(item.name)}` : String(item.name);
}

function callOf(item: Item): ToolCall | undefined {
  if (item.type === "function_call")
    return { id: String(item.call_id), type: "function", function: { name: callName(item), arguments: String(item.arguments ?? "{}") } };
  if (item.type === "custom_tool_call")
    return {
      id: String(item.call_id),
      type: "function",
      function: { name: callName(item), arguments: JSON.stringify({ input: item.input ?? "" }) },
    };
  return undefined;
}

/** The summary texts (or the full reasoning text) of a reasoning item. */
function reasoningText(item: Item): string {
  const parts = [...((item.summary as Item[] | undefined) ?? []), ...((item.content as Item[] | undefined) ?? [])];
  return parts.map((part) => (typeof part.text === "string" ? part.text : "")).join("");
}

/** A Responses answer as a chat completion; `native` keeps it for a Responses client. */
export function responsesCompletion(response: Item, id: string, native: boolean): ChatCompletion {
  if (!response || typeof response !== "object" || !Array.isArray(response.output)) throw invalidAnswer(id);
  let text = "";
  let reasoning = "";
  const calls: ToolCall[] = [];
  for (const item of response.output as Item[]) {
    if (item.type === "message")
      for (const part of (item.content as Item[] | undefined) ?? []) {
        if (typeof part.text === "string") text += part.text;
        else if (typeof part.refusal === "string") text += part.refusal;
      }
    if (item.type === "reasoning") reasoning += reasoningText(item);
    const call = callOf(item);
    if (call) calls.push(call);
  }
  const completion: ChatCompletion = {
    id: typeof response.id === "string" ? response.id : `chatcmpl-${randomUUID()}`,
    object: "chat.completion",
    created: typeof response.created_at === "number" ? response.created_at : Math.floor(Date.now() / 1000),
    model: typeof response.model === "string" ? response.model : id,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: text || (calls.length ? null : ""),
          ...(reasoning ? { reasoning_content: reasoning } : {}),
          ...(calls.length ? { tool_calls: calls } : {}),
        },
        finish_reason: finishOf(response, calls.length > 0),
      },
    ],
  };
  const usage = usageOf(response.usage as ResponsesUsage | undefined);
  if (usage) completion.usage = usage;
  return native ? withNative(completion, { dialect: "responses", body: response }) : completion;
}

/** An error the upstream reports in its stream (`error`, `response.failed`): the status its code implies. */
function streamError(event: Item): ProviderError {
  const error = ((event.response as Item | undefined)?.error ?? event.error ?? event) as { code?: unknown; message?: unknown };
  const code = String(error.code ?? "");
  const status = /rate_limit/.test(code)
    ? 429
    : /invalid|not_found|context_length/.test(code)
      ? 400
      : /overloaded|unavailable/.test(code)
        ? 503
        : 502;
  return new ProviderError("UPSTREAM", messageOf({ error }, status), {
    status,
    upstreamStatus: status,
    upstreamBody: { error },
    retryable: isRetryableStatus(status),
  });
}

/**
 * Responses stream events → chat chunks, made as the bytes arrive. With `native`, every chunk
 * carries the events it was read from (a chunk of its own for events without a chat meaning), so
 * a Responses client gets the upstream's stream as it came.
 */
export function responsesChunks(id: string, native: boolean): UpstreamEventHandlers {
  let frames = new ChunkFrames(`chatcmpl-${randomUUID()}`, id);
  let roleSent = false;
  let finished = false;
  /** Output index → tool call index. */
  const tools = new Map<number, number>();
  const delta = (fields: Parameters<ChunkFrames["delta"]>[0], finish: FinishReason | null = null): ChatChunk => {
    if (roleSent) return frames.delta(fields, finish);
    roleSent = true;
    return frames.delta({ role: "assistant", ...fields }, finish);
  };
  return {
    event(data, push) {
      let event: Item;
      try {
        event = JSON.parse(data) as Item;
      } catch {
        throw invalidAnswer(id);
      }
      const made: ChatChunk[] = [];
      const outputIndex = Number(event.output_index);
      switch (event.type) {
        case "response.created": {
          const response = event.response as Item | undefined;
          if (typeof response?.id === "string")
            frames = new ChunkFrames(response.id, typeof response.model === "string" ? response.model : id);
          break;
        }
        case "response.output_item.added": {
          const item = event.item as Item | undefined;
          const call = item && callOf(item);
          if (call) {
            const index = tools.size;
            tools.set(outputIndex, index);
            made.push(
              delta({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }] }),
            );
          }
          break;
        }
        case "response.function_call_arguments.delta":
        case "response.custom_tool_call_input.delta": {
          const index = tools.get(outputIndex);
          if (index !== undefined && typeof event.delta === "string" && event.delta)
            made.push(delta({ tool_calls: [{ index, function: { arguments: event.delta } }] }));
          break;
        }
        case "response.output_text.delta":
        case "response.refusal.delta":
          if (typeof event.delta === "string" && event.delta) made.push(delta({ content: event.delta }));
          break;
        case "response.reasoning_summary_text.delta":
        case "response.reasoning_text.delta":
          if (typeof event.delta === "string" && event.delta) made.push(delta({ reasoning_content: event.delta }));
          break;
        case "response.completed":
        case "response.incomplete": {
          const response = (event.response ?? {}) as Item;
          finished = true;
          made.push(delta({}, finishOf(response, tools.size > 0)));
          const usage = usageOf(response.usage as ResponsesUsage | undefined);
          if (usage) made.push(frames.usage(usage));
          break;
        }
        case "response.failed":
        case "error":
          throw streamError(event);
        default:
          // Lifecycle events and parts this reading does not need (the events themselves reach a Responses client).
          break;
      }
      if (!native) {
        for (const chunk of made) push(chunk);
        return;
      }
      if (!made.length) made.push({ ...frames.delta({}), choices: [] });
      for (const [index, chunk] of made.entries()) push(withNative(chunk, { dialect: "responses", events: index === 0 ? [event] : [] }));
    },
    end() {
      if (!finished) throw streamCut(id);
    },
  };
}
