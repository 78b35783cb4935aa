import type { AnthropicModelConfig } from "../models-config.js";
import { withNative } from "../native.js";
import { Translation, applyMatrix, forwardedBody } from "../translate/matrix.js";
import { anthropicThinking } from "../translate/reasoning.js";
import { FORMAT_TOOL, closedSchema, formatTool, unwrapFormatTool } from "../translate/structured.js";
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
  Usage,
} from "../types.js";
import { ProviderError, isRetryableStatus, messageOf } from "./provider-error.js";
import {
  ChunkFrames,
  apiKeyOf,
  argumentsObject,
  declaredTools,
  fileDataOf,
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
    const model = config.upstreamModel ?? id;
    // A Messages client's request goes as it came (docs/dialects.md "Same dialect: forwarded").
    const native = request.source?.dialect === "messages" ? request.source : undefined;
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: request.stream ? "text/event-stream" : "application/json",
      "anthropic-version": native?.headers?.["anthropic-version"] ?? ANTHROPIC_VERSION,
    };
    if (native?.headers?.["anthropic-beta"]) headers["anthropic-beta"] = native.headers["anthropic-beta"];
    if (apiKey) headers["x-api-key"] = apiKey;
    const t = new Translation("anthropic", id, config);
    const maxTokens = outputCapOf(request.max_tokens, config, countPromptTokens(request.messages));
    const emulated = !native && emulatesFormat(request, config.structuredOutput);
    const body = native ? forwardedBody(native.body, model, t) : anthropicRequest(request, model, maxTokens, t, config.structuredOutput);
    const url = `${trimSlash(config.baseURL)}/v1/messages${native?.query ? `?${native.query}` : ""}`;
    const response = await post({ id, url, headers, body: JSON.stringify(body), signal, timeoutMs, traceparent: trace.traceparent });
    let result: ProviderResult = !request.stream
      ? {
          kind: "completion",
          completion: completionOf(await readJson<AnthropicMessage>(response, timeoutMs, id), id, native !== undefined),
        }
      : { kind: "stream", chunks: upstreamEvents(response.body, timeoutMs, id, signal, streamChunks(id, native !== undefined)) };
    if (emulated) result = unwrapFormatTool(result, request.response_format!);
    return t.warnings.length ? { ...result, warnings: t.warnings } : result;
  }
}

/** Structured output asked for with a forced tool call: `json_object` always, `json_schema` when the model config says so. */
function emulatesFormat(request: ChatRequest, mode: "native" | "tool"): boolean {
  const type = request.response_format?.type;
  return type === "json_object" || (type === "json_schema" && mode === "tool");
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
  output_tokens_details?: { thinking_tokens?: number };
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

/** The canonical request as a Messages API body (docs/dialects.md "The matrix", column anthropic). */
export function anthropicRequest(
  request: ChatRequest,
  model: string,
  maxTokens: number,
  t: Translation = new Translation("anthropic", model),
  structuredOutput: "native" | "tool" = "native",
): Record<string, unknown> {
  const r = applyMatrix(request, t);
  // The request's cap (as the matrix left it: lowered to the model's maxOutputTokens), else the model's.
  maxTokens = r.max_tokens ?? maxTokens;
  // System messages anywhere in the conversation are merged, in order, into the top-level `system`.
  const system = r.messages
    .filter(isSystem)
    .map((message) => textOf(message.content))
    .filter(Boolean)
    .join("\n\n");
  const messages: { role: "user" | "assistant"; content: Block[] }[] = [];
  r.messages.forEach((message, index) => {
    if (isSystem(message)) return;
    if (message.role !== "user" && message.role !== "assistant" && message.role !== "tool")
      t.refuse(`messages.${index}.role`, `${message.role} has no equivalent in the Messages API`);
    const role = message.role === "assistant" ? "assistant" : "user";
    const blocks = blocksOf(message, `messages.${index}`, t);
    if (!blocks.length) return;
    // Consecutive turns of one role (tool results above all) go in one message.
    const last = messages.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  });
  const body: Record<string, unknown> = { model, messages, max_tokens: maxTokens };
  if (system) body.system = system;
  if (r.stream) body.stream = true;
  if (r.temperature !== undefined) body.temperature = r.temperature;
  if (r.top_p !== undefined) body.top_p = r.top_p;
  if (r.top_k !== undefined) body.top_k = r.top_k;
  const stop = stopList(r.stop);
  if (stop) body.stop_sequences = stop;
  if (r.user !== undefined) body.metadata = { user_id: r.user };
  let { tools, fromHistory } = declaredTools(r);
  let forced: ToolChoice | undefined;
  const format = r.response_format;
  if (format && format.type !== "text") {
    if (format.type === "json_schema" && structuredOutput === "native") {
      body.output_config = { format: { type: "json_schema", schema: closedSchema(format.json_schema.schema ?? { type: "object" }) } };
    } else {
      if (tools.some((tool) => tool.function.name === FORMAT_TOOL))
        t.refuse("tools", `${FORMAT_TOOL} is the name the service gives structured output here`);
      const emulation = formatTool(format, fromHistory ? undefined : tools);
      if (emulation) {
        ({ tools } = emulation);
        forced = emulation.tool_choice;
        fromHistory = false;
      }
    }
  }
  if (r.reasoning_effort !== undefined) {
    // The Messages API refuses thinking with a forced tool call, which an emulated format is.
    const thinking = forced ? undefined : anthropicThinking(r.reasoning_effort, r.reasoning_budget, maxTokens);
    if (thinking) body.thinking = thinking;
    else if (forced) t.drop("reasoning_effort", "thinking cannot go with the forced tool call that asks for this structured output");
    else t.drop("reasoning_effort", `max_tokens ${maxTokens} leaves no room for a thinking budget (at least 1024 tokens)`);
  }
  if (tools.length) {
    body.tools = tools.map((tool) => ({
      name: tool.function.name,
      ...(tool.function.description ? { description: tool.function.description } : {}),
      input_schema: tool.function.parameters ?? { type: "object", properties: {} },
    }));
    // Tools declared only for the history's sake are not to be called again.
    const choice = fromHistory ? { type: "none" } : toolChoiceOf(forced ?? r.tool_choice, r.parallel_tool_calls);
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

function blocksOf(message: ChatMessage, at: string, t: Translation): Block[] {
  if (message.role === "tool") {
    return [{ type: "tool_result", tool_use_id: message.tool_call_id ?? "", content: textOf(message.content) }];
  }
  const blocks: Block[] = [];
  if (typeof message.content === "string") {
    if (message.content) blocks.push({ type: "text", text: message.content });
  } else {
    (message.content ?? []).forEach((part, index) => {
      if (part.type === "text" && typeof part.text === "string") {
        if (part.text) blocks.push({ type: "text", text: part.text });
        return;
      }
      const url = imageUrlOf(part);
      if (url) {
        const data = parseDataUrl(url);
        blocks.push({
          type: "image",
          source: data ? { type: "base64", media_type: data.mediaType, data: data.data } : { type: "url", url },
        });
        return;
      }
      const file = fileDataOf(part);
      if (file) {
        blocks.push({ type: "document", source: { type: "base64", media_type: file.mediaType, data: file.data } });
        return;
      }
      t.refuse(`${at}.content.${index}.type`, `content part type ${JSON.stringify(part.type)} has no equivalent in the Messages API`);
    });
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

/** The Messages API's usage as the chat format's, cache reads and writes and thinking tokens as its details. */
function usageOfAnthropic(prompt: AnthropicUsage | undefined, output: number, thinking: number | undefined): Usage {
  const usage = usageFrom(promptTokensOf(prompt), output);
  const cached = prompt?.cache_read_input_tokens ?? 0;
  const created = prompt?.cache_creation_input_tokens ?? 0;
  if (cached || created)
    usage.prompt_tokens_details = { ...(cached ? { cached_tokens: cached } : {}), ...(created ? { cache_creation_tokens: created } : {}) };
  if (thinking) usage.completion_tokens_details = { reasoning_tokens: thinking };
  return usage;
}

function completionOf(message: AnthropicMessage, id: string, native: boolean): ChatCompletion {
  if (!message || typeof message !== "object" || !Array.isArray(message.content)) throw invalidAnswer(id);
  let text = "";
  let reasoning = "";
  const toolCalls: ToolCall[] = [];
  for (const block of message.content) {
    if (block.type === "text" && typeof block.text === "string") text += block.text;
    if (block.type === "thinking" && typeof block.thinking === "string") reasoning += block.thinking;
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
          ...(reasoning ? { reasoning_content: reasoning } : {}),
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: anthropicFinish(message.stop_reason),
      },
    ],
  };
  if (message.usage)
    completion.usage = usageOfAnthropic(
      message.usage,
      message.usage.output_tokens ?? 0,
      message.usage.output_tokens_details?.thinking_tokens,
    );
  return native ? withNative(completion, { dialect: "messages", body: message as Record<string, unknown> }) : completion;
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

/**
 * Stream events → `chat.completion.chunk` frames, made as the bytes arrive (shared.ts
 * `upstreamEvents`). With `native`, every chunk carries the events it was read from (a chunk of
 * its own for events without a chat meaning), so a Messages client gets the upstream's stream as
 * it came (rpc/chat/native.ts).
 */
function streamChunks(id: string, native: boolean): UpstreamEventHandlers {
  let frames = new ChunkFrames(`chatcmpl-${Date.now()}`, id);
  let roleSent = false;
  let prompt: AnthropicUsage | undefined;
  let output = 0;
  let thinking: number | undefined;
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
  const usage = () => usageOfAnthropic(prompt, output, thinking);
  /** The chunks one event stands for. */
  const read = (event: Record<string, unknown>, made: ChatChunk[]) => {
    switch (event.type) {
      case "message_start": {
        const message = event.message as AnthropicMessage | undefined;
        if (message?.id) frames = new ChunkFrames(message.id, message.model ?? id);
        prompt = message?.usage;
        output = message?.usage?.output_tokens ?? 0;
        break;
      }
      case "content_block_start": {
        const block = event.content_block as Block | undefined;
        if (block?.type === "tool_use") {
          const index = tools.size;
          tools.set(Number(event.index), index);
          made.push(
            delta({
              tool_calls: [{ index, id: String(block.id), type: "function", function: { name: String(block.name), arguments: "" } }],
            }),
          );
        } else if (block?.type === "text" && typeof block.text === "string" && block.text) {
          made.push(delta({ content: block.text }));
        }
        break;
      }
      case "content_block_delta": {
        const part = event.delta as Block | undefined;
        if (part?.type === "text_delta" && typeof part.text === "string") made.push(delta({ content: part.text }));
        else if (part?.type === "thinking_delta" && typeof part.thinking === "string" && part.thinking)
          made.push(delta({ reasoning_content: part.thinking }));
        else if (part?.type === "input_json_delta" && typeof part.partial_json === "string" && part.partial_json) {
          const index = tools.get(Number(event.index));
          if (index !== undefined) {
            argued.add(index);
            made.push(delta({ tool_calls: [{ index, function: { arguments: part.partial_json } }] }));
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
          made.push(delta({ tool_calls: [{ index, function: { arguments: "{}" } }] }));
        }
        break;
      }
      case "message_delta": {
        const last = event.usage as AnthropicUsage | undefined;
        if (last?.output_tokens !== undefined) output = last.output_tokens;
        if (last?.output_tokens_details?.thinking_tokens !== undefined) thinking = last.output_tokens_details.thinking_tokens;
        // The usage so far is cumulative: a prompt count here (with the cache's) is the whole prompt.
        if (last && (last.input_tokens != null || last.cache_read_input_tokens != null || last.cache_creation_input_tokens != null)) {
          if (promptTokensOf(last) >= promptTokensOf(prompt)) prompt = { ...prompt, ...last };
        }
        const reason = (event.delta as { stop_reason?: string | null } | undefined)?.stop_reason;
        if (reason !== undefined && reason !== null && !finished) {
          finished = true;
          made.push(frames.delta(roleSent ? {} : { role: "assistant" }, anthropicFinish(reason)));
          roleSent = true;
        }
        break;
      }
      case "message_stop":
        if (!finished) throw streamCut(id);
        // The body ends right after; reading it to its end returns the connection to the pool.
        if (!usageSent) made.push(frames.usage(usage()));
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
        // ping, and events this reading does not use (they reach a Messages client as they came).
        break;
    }
  };
  return {
    event(data, push) {
      let event: Record<string, unknown>;
      try {
        event = JSON.parse(data) as Record<string, unknown>;
      } catch {
        throw invalidAnswer(id);
      }
      const made: ChatChunk[] = [];
      read(event, made);
      if (!native) {
        for (const chunk of made) push(chunk);
        return;
      }
      if (!made.length) made.push({ ...frames.delta({}), choices: [] });
      for (const [index, chunk] of made.entries()) push(withNative(chunk, { dialect: "messages", events: index === 0 ? [event] : [] }));
    },
    // The connection ended before message_stop: after the stop reason only the usage is missing.
    end(push) {
      if (!finished) throw streamCut(id);
      if (usageSent) return;
      const chunk = frames.usage(usage());
      push(native ? withNative(chunk, { dialect: "messages", events: [] }) : chunk);
    },
  };
}
