import type { AnthropicModelConfig } from "../models-config.js";
import { countPromptTokens } from "../tokens.js";
import type {
  ChatChunk,
  ChatCompletion,
  ChatMessage,
  ChatRequest,
  FinishReason,
  Provider,
  ProviderResult,
  ToolCall,
  ToolChoice,
} from "../types.js";
import { ProviderError, isRetryableStatus, messageOf } from "./provider-error.js";
import {
  ChunkFrames,
  apiKeyOf,
  argumentsObject,
  declaredTools,
  imageUrlOf,
  invalidAnswer,
  isSystem,
  outputCapOf,
  parseDataUrl,
  post,
  readJson,
  stopList,
  streamCut,
  textOf,
  trimSlash,
  upstreamEvents,
  type UpstreamEventHandlers,
  usageFrom,
} from "./shared.js";

export interface AnthropicProviderOptions {
  id: string;
  config: AnthropicModelConfig;
  timeoutSeconds: number;
  env: Record<string, string | undefined>;
}

/** The Messages API version the translation follows. */
export const ANTHROPIC_VERSION = "2023-06-01";

/**
 * Anthropic's Messages API (`POST <baseURL>/v1/messages`, docs/providers.md): `system`
 * messages become the top-level `system`, tool calls and results become `tool_use` and
 * `tool_result` blocks, and `max_tokens` (required there) is always sent. Answers and stream
 * events are translated back to `chat.completion` and `chat.completion.chunk` frames, the
 * usage in the last frame as openai-compatible streams send it.
 */
export class AnthropicProvider implements Provider {
  readonly #options: AnthropicProviderOptions;

  constructor(options: AnthropicProviderOptions) {
    this.#options = options;
  }

  async complete(request: ChatRequest, signal: AbortSignal, trace: { traceparent?: string } = {}): Promise<ProviderResult> {
    const { config, id, env } = this.#options;
    const timeoutMs = (config.timeoutSeconds ?? this.#options.timeoutSeconds) * 1000;
    const apiKey = apiKeyOf(config.apiKeyEnv, env, id);
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: request.stream ? "text/event-stream" : "application/json",
      "anthropic-version": ANTHROPIC_VERSION,
    };
    if (apiKey) headers["x-api-key"] = apiKey;
    const body = anthropicRequest(
      request,
      config.upstreamModel ?? id,
      outputCapOf(request.max_tokens, config, countPromptTokens(request.messages)),
    );
    const url = `${trimSlash(config.baseURL)}/v1/messages`;
    const response = await post({ id, url, headers, body: JSON.stringify(body), signal, timeoutMs, traceparent: trace.traceparent });
    if (!request.stream)
      return { kind: "completion", completion: completionOf(await readJson<AnthropicMessage>(response, timeoutMs, id), id) };
    return { kind: "stream", chunks: upstreamEvents(response.body, timeoutMs, id, signal, streamChunks(id)) };
  }
}

type Block = Record<string, unknown>;
interface AnthropicMessage {
  id?: string;
  model?: string;
  content?: Block[];
  stop_reason?: string | null;
  usage?: AnthropicUsage;
}
interface AnthropicUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

/** The canonical request as a Messages API body. */
export function anthropicRequest(request: ChatRequest, model: string, maxTokens: number): Record<string, unknown> {
  const system = request.messages
    .filter(isSystem)
    .map((message) => textOf(message.content))
    .filter(Boolean)
    .join("\n\n");
  const messages: { role: "user" | "assistant"; content: Block[] }[] = [];
  for (const message of request.messages) {
    if (isSystem(message)) continue;
    const role = message.role === "assistant" ? "assistant" : "user";
    const blocks = blocksOf(message);
    if (!blocks.length) continue;
    // Consecutive turns of one role (tool results above all) go in one message.
    const last = messages.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  }
  const body: Record<string, unknown> = { model, messages, max_tokens: maxTokens };
  if (system) body.system = system;
  if (request.stream) body.stream = true;
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.top_p !== undefined) body.top_p = request.top_p;
  const stop = stopList(request.stop);
  if (stop) body.stop_sequences = stop;
  const { tools, fromHistory } = declaredTools(request);
  if (tools.length) {
    body.tools = tools.map((tool) => ({
      name: tool.function.name,
      ...(tool.function.description ? { description: tool.function.description } : {}),
      input_schema: tool.function.parameters ?? { type: "object", properties: {} },
    }));
    // Tools declared only for the history's sake are not to be called again.
    const choice = fromHistory ? { type: "none" } : toolChoiceOf(request.tool_choice, request.parallel_tool_calls);
    if (choice) body.tool_choice = choice;
  }
  return body;
}

function toolChoiceOf(choice: ToolChoice | undefined, parallel: boolean | undefined): Record<string, unknown> | undefined {
  let out: Record<string, unknown> | undefined;
  if (choice === "auto") out = { type: "auto" };
  else if (choice === "required") out = { type: "any" };
  else if (choice === "none") out = { type: "none" };
  else if (choice && typeof choice === "object") out = { type: "tool", name: choice.function.name };
  if (parallel === false && out?.type !== "none") out = { ...(out ?? { type: "auto" }), disable_parallel_tool_use: true };
  return out;
}

function blocksOf(message: ChatMessage): Block[] {
  if (message.role === "tool") {
    return [{ type: "tool_result", tool_use_id: message.tool_call_id ?? "", content: textOf(message.content) }];
  }
  const blocks: Block[] = [];
  if (typeof message.content === "string") {
    if (message.content) blocks.push({ type: "text", text: message.content });
  } else {
    for (const part of message.content ?? []) {
      if (part.type === "text" && typeof part.text === "string") {
        if (part.text) blocks.push({ type: "text", text: part.text });
        continue;
      }
      const url = imageUrlOf(part);
      if (!url) continue;
      const data = parseDataUrl(url);
      blocks.push({ type: "image", source: data ? { type: "base64", media_type: data.mediaType, data: data.data } : { type: "url", url } });
    }
  }
  if (message.role === "assistant") {
    for (const call of message.tool_calls ?? []) {
      blocks.push({ type: "tool_use", id: call.id, name: call.function.name, input: argumentsObject(call.function.arguments) });
    }
  }
  return blocks;
}

/** `stop_reason` → `finish_reason` (docs/providers.md). */
export function anthropicFinish(reason: string | null | undefined): FinishReason {
  switch (reason) {
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length";
    case "tool_use":
      return "tool_calls";
    case "refusal":
      return "content_filter";
    default:
      return "stop";
  }
}

function promptTokensOf(usage: AnthropicUsage | undefined): number {
  return (usage?.input_tokens ?? 0) + (usage?.cache_creation_input_tokens ?? 0) + (usage?.cache_read_input_tokens ?? 0);
}

function completionOf(message: AnthropicMessage, id: string): ChatCompletion {
  if (!message || typeof message !== "object" || !Array.isArray(message.content)) throw invalidAnswer(id);
  let text = "";
  const toolCalls: ToolCall[] = [];
  for (const block of message.content) {
    if (block.type === "text" && typeof block.text === "string") text += block.text;
    if (block.type === "tool_use") {
      toolCalls.push({
        id: String(block.id),
        type: "function",
        function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) },
      });
    }
  }
  const completion: ChatCompletion = {
    id: message.id ?? `chatcmpl-${Date.now()}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: message.model ?? id,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: text || (toolCalls.length ? null : ""),
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: anthropicFinish(message.stop_reason),
      },
    ],
  };
  if (message.usage) completion.usage = usageFrom(promptTokensOf(message.usage), message.usage.output_tokens ?? 0);
  return completion;
}

/** Status of an `error` stream event, by its type (docs/providers.md). */
const ERROR_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529,
};

/** Stream events → `chat.completion.chunk` frames, made as the bytes arrive (shared.ts `upstreamEvents`). */
function streamChunks(id: string): UpstreamEventHandlers {
  let frames = new ChunkFrames(`chatcmpl-${Date.now()}`, id);
  let roleSent = false;
  let prompt = 0;
  let output = 0;
  let finished = false;
  let usageSent = false;
  /** Content block index → index among the tool calls. */
  const tools = new Map<number, number>();
  /** Tool calls whose arguments have started. */
  const argued = new Set<number>();
  const delta = (fields: Parameters<ChunkFrames["delta"]>[0]): ChatChunk => {
    if (roleSent) return frames.delta(fields);
    roleSent = true;
    return frames.delta({ role: "assistant", ...fields });
  };
  return {
    event(data, push) {
      // biome-ignore lint/suspicious/noExplicitAny: a provider's stream event, read field by field with checks
      let event: Record<string, any>;
      try {
        // biome-ignore lint/suspicious/noExplicitAny: as above
        event = JSON.parse(data) as Record<string, any>;
      } catch {
        throw invalidAnswer(id);
      }
      switch (event.type) {
        case "message_start": {
          const message = event.message as AnthropicMessage | undefined;
          if (message?.id) frames = new ChunkFrames(message.id, message.model ?? id);
          prompt = promptTokensOf(message?.usage);
          output = message?.usage?.output_tokens ?? 0;
          break;
        }
        case "content_block_start": {
          const block = event.content_block as Block | undefined;
          if (block?.type === "tool_use") {
            const index = tools.size;
            tools.set(Number(event.index), index);
            push(
              delta({
                tool_calls: [{ index, id: String(block.id), type: "function", function: { name: String(block.name), arguments: "" } }],
              }),
            );
          } else if (block?.type === "text" && typeof block.text === "string" && block.text) {
            push(delta({ content: block.text }));
          }
          break;
        }
        case "content_block_delta": {
          const part = event.delta as Block | undefined;
          if (part?.type === "text_delta" && typeof part.text === "string") push(delta({ content: part.text }));
          else if (part?.type === "input_json_delta" && typeof part.partial_json === "string" && part.partial_json) {
            const index = tools.get(Number(event.index));
            if (index !== undefined) {
              argued.add(index);
              push(delta({ tool_calls: [{ index, function: { arguments: part.partial_json } }] }));
            }
          }
          break;
        }
        case "content_block_stop": {
          // A tool without parameters streams an empty partial_json: its arguments are "{}", as
          // in a JSON answer, so a client can parse them.
          const index = tools.get(Number(event.index));
          if (index !== undefined && !argued.has(index)) {
            argued.add(index);
            push(delta({ tool_calls: [{ index, function: { arguments: "{}" } }] }));
          }
          break;
        }
        case "message_delta": {
          const usage = event.usage as AnthropicUsage | undefined;
          if (usage?.output_tokens !== undefined) output = usage.output_tokens;
          if (
            usage &&
            (usage.input_tokens !== undefined || usage.cache_read_input_tokens != null || usage.cache_creation_input_tokens != null)
          ) {
            prompt = Math.max(prompt, promptTokensOf(usage));
          }
          const reason = (event.delta as { stop_reason?: string | null } | undefined)?.stop_reason;
          if (reason !== undefined && reason !== null && !finished) {
            finished = true;
            push(frames.delta(roleSent ? {} : { role: "assistant" }, anthropicFinish(reason)));
            roleSent = true;
          }
          break;
        }
        case "message_stop":
          if (!finished) throw streamCut(id);
          // The body ends right after; reading it to its end returns the connection to the pool.
          if (!usageSent) push(frames.usage(usageFrom(prompt, output)));
          usageSent = true;
          break;
        case "error": {
          const type = String((event.error as { type?: unknown } | undefined)?.type ?? "api_error");
          const status = ERROR_STATUS[type] ?? 502;
          throw new ProviderError("UPSTREAM", messageOf(event, status), {
            status,
            upstreamStatus: status,
            upstreamBody: event,
            retryable: isRetryableStatus(status),
          });
        }
        default:
          // ping, and events this translation does not use.
          break;
      }
    },
    // The connection ended before message_stop: after the stop reason only the usage is missing.
    end(push) {
      if (!finished) throw streamCut(id);
      if (!usageSent) push(frames.usage(usageFrom(prompt, output)));
    },
  };
}
