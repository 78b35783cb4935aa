import { randomUUID } from "node:crypto";
import type { GeminiModelConfig } from "../models-config.js";
import { Translation, applyMatrix } from "../translate/matrix.js";
import { budgetOf } from "../translate/reasoning.js";
import type {
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
  fileDataOf,
  imageUrlOf,
  invalidAnswer,
  isSystem,
  parseDataUrl,
  post,
  readJson,
  stopList,
  streamCut,
  textOf,
  toolNamesById,
  trimSlash,
  upstreamEvents,
  type UpstreamEventHandlers,
  usageFrom,
} from "./shared.js";

export interface GeminiProviderOptions {
  id: string;
  config: GeminiModelConfig;
  timeoutSeconds: number;
  env: Record<string, string | undefined>;
}

/**
 * Google's Generative Language API (docs/providers.md): `POST <baseURL>/models/<model>:generateContent`
 * and `:streamGenerateContent?alt=sse`, the key in `x-goog-api-key`. Messages become `contents`
 * (roles `user`/`model`, `parts`), `system` messages the `systemInstruction`, tools
 * `functionDeclarations`, tool calls and results `functionCall` / `functionResponse` parts.
 * `usageMetadata` becomes the usage, `finishReason` the finish reason.
 */
export class GeminiProvider implements Provider {
  readonly #options: GeminiProviderOptions;

  constructor(options: GeminiProviderOptions) {
    this.#options = options;
  }

  async complete(request: ChatRequest, signal: AbortSignal, trace: { traceparent?: string } = {}): Promise<ProviderResult> {
    const { config, id, env } = this.#options;
    const timeoutMs = (config.timeoutSeconds ?? this.#options.timeoutSeconds) * 1000;
    const apiKey = apiKeyOf(config.apiKeyEnv, env, id);
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: request.stream ? "text/event-stream" : "application/json",
    };
    if (apiKey) headers["x-goog-api-key"] = apiKey;
    const model = encodeURIComponent(config.upstreamModel ?? id);
    const url = `${trimSlash(config.baseURL)}/models/${model}:${request.stream ? "streamGenerateContent?alt=sse" : "generateContent"}`;
    const t = new Translation("gemini", id, config);
    const body = JSON.stringify(geminiRequest(request, t));
    const response = await post({ id, url, headers, body, signal, timeoutMs, traceparent: trace.traceparent });
    const result: ProviderResult = !request.stream
      ? { kind: "completion", completion: completionOf(await readJson<GeminiResponse>(response, timeoutMs, id), id) }
      : { kind: "stream", chunks: upstreamEvents(response.body, timeoutMs, id, signal, streamChunks(id)) };
    return t.warnings.length ? { ...result, warnings: t.warnings } : result;
  }
}

type Part = Record<string, unknown>;
interface GeminiResponse {
  candidates?: { content?: { role?: string; parts?: Part[] }; finishReason?: string; index?: number }[];
  promptFeedback?: { blockReason?: string };
  usageMetadata?: {
    promptTokenCount?: number;
    candidatesTokenCount?: number;
    thoughtsTokenCount?: number;
    cachedContentTokenCount?: number;
    totalTokenCount?: number;
  };
  modelVersion?: string;
  responseId?: string;
  error?: unknown;
}

/**
 * Gemini 3 models return a `thoughtSignature` with their function calls and want it back with
 * them; the chat format has no place for it, so it travels in the tool call id.
 */
const SIGNATURE = "__thought__";

/**
 * A tool call id the adapter made up because Gemini gave the call none (Gemini 2.x): it is not
 * sent back. Any other id is echoed on the `functionCall` and on the `functionResponse` that
 * answers it, as Gemini 3 requires of the ids it gives every call.
 */
const MADE_UP_ID = /^call_[0-9a-f]{24}$/;

/** A tool call id split into the call's own id (undefined when made up here) and its thought signature. */
function callIdParts(id: string): { id?: string; signature?: string } {
  const cut = id.indexOf(SIGNATURE);
  const own = cut >= 0 ? id.slice(0, cut) : id;
  return { ...(own && !MADE_UP_ID.test(own) ? { id: own } : {}), ...(cut >= 0 ? { signature: id.slice(cut + SIGNATURE.length) } : {}) };
}

/** The canonical request as a `generateContent` body (docs/dialects.md "The matrix", column gemini). */
export function geminiRequest(request: ChatRequest, t: Translation = new Translation("gemini", request.model)): Record<string, unknown> {
  const r = applyMatrix(request, t);
  const names = toolNamesById(r.messages);
  // System messages anywhere in the conversation are merged, in order, into `systemInstruction`.
  const system = r.messages
    .filter(isSystem)
    .map((message) => textOf(message.content))
    .filter(Boolean)
    .join("\n\n");
  const contents: { role: "user" | "model"; parts: Part[] }[] = [];
  r.messages.forEach((message, index) => {
    if (isSystem(message)) return;
    if (message.role !== "user" && message.role !== "assistant" && message.role !== "tool")
      t.refuse(`messages.${index}.role`, `${message.role} has no equivalent in the Gemini API`);
    const role = message.role === "assistant" ? "model" : "user";
    const parts = partsOf(message, names, `messages.${index}`, t);
    if (!parts.length) return;
    const last = contents.at(-1);
    if (last?.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  });
  const body: Record<string, unknown> = { contents };
  if (system) body.systemInstruction = { parts: [{ text: system }] };
  const generation: Record<string, unknown> = {};
  if (r.temperature !== undefined) generation.temperature = r.temperature;
  if (r.top_p !== undefined) generation.topP = r.top_p;
  if (r.top_k !== undefined) generation.topK = r.top_k;
  if (r.max_tokens !== undefined) generation.maxOutputTokens = r.max_tokens;
  if (r.seed !== undefined) generation.seed = r.seed;
  if (r.presence_penalty !== undefined) generation.presencePenalty = r.presence_penalty;
  if (r.frequency_penalty !== undefined) generation.frequencyPenalty = r.frequency_penalty;
  const stop = stopList(r.stop);
  if (stop) generation.stopSequences = stop;
  const format = r.response_format;
  if (format && format.type !== "text") {
    generation.responseMimeType = "application/json";
    if (format.type === "json_schema" && format.json_schema.schema) generation.responseJsonSchema = format.json_schema.schema;
  }
  if (r.reasoning_effort !== undefined) {
    const budget = r.reasoning_budget ?? budgetOf(r.reasoning_effort);
    generation.thinkingConfig = { thinkingBudget: Math.min(budget, 32768), ...(budget > 0 ? { includeThoughts: true } : {}) };
  }
  if (Object.keys(generation).length) body.generationConfig = generation;
  if (r.tools?.length) {
    body.tools = [
      {
        functionDeclarations: r.tools.map((tool) => ({
          name: tool.function.name,
          ...(tool.function.description ? { description: tool.function.description } : {}),
          ...(tool.function.parameters ? { parameters: schemaOf(tool.function.parameters) } : {}),
        })),
      },
    ];
    const config = toolConfigOf(r.tool_choice);
    if (config) body.toolConfig = { functionCallingConfig: config };
  }
  return body;
}

function toolConfigOf(choice: ToolChoice | undefined): Record<string, unknown> | undefined {
  if (choice === "auto") return { mode: "AUTO" };
  if (choice === "required") return { mode: "ANY" };
  if (choice === "none") return { mode: "NONE" };
  if (choice && typeof choice === "object") return { mode: "ANY", allowedFunctionNames: [choice.function.name] };
  return undefined;
}

/** Function parameters take an OpenAPI subset of JSON Schema: keywords outside it are dropped. */
function schemaOf(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(schemaOf);
  if (!schema || typeof schema !== "object") return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "$schema" || key === "additionalProperties" || key === "$id" || key === "strict") continue;
    out[key] =
      key === "properties" && value && typeof value === "object"
        ? Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, schemaOf(sub)]))
        : schemaOf(value);
  }
  return out;
}

function partsOf(message: ChatMessage, names: Map<string, string>, at: string, t: Translation): Part[] {
  if (message.role === "tool") {
    const text = textOf(message.content);
    const parsed = argumentsObject(text);
    const response = "arguments" in parsed && Object.keys(parsed).length === 1 ? { content: text } : parsed;
    const callId = message.tool_call_id ?? "";
    const name = names.get(callId) ?? message.name ?? "";
    const { id } = callIdParts(callId);
    return [{ functionResponse: { ...(id ? { id } : {}), name, response } }];
  }
  const parts: Part[] = [];
  if (typeof message.content === "string") {
    if (message.content) parts.push({ text: message.content });
  } else {
    (message.content ?? []).forEach((part, index) => {
      if (part.type === "text" && typeof part.text === "string") {
        if (part.text) parts.push({ text: part.text });
        return;
      }
      const url = imageUrlOf(part);
      if (url) {
        const data = parseDataUrl(url);
        parts.push(
          data ? { inlineData: { mimeType: data.mediaType, data: data.data } } : { fileData: { mimeType: mimeOf(url), fileUri: url } },
        );
        return;
      }
      const file = fileDataOf(part);
      if (file) {
        parts.push({ inlineData: { mimeType: file.mediaType, data: file.data } });
        return;
      }
      const audio = part.input_audio as { data?: unknown; format?: unknown } | undefined;
      if (part.type === "input_audio" && typeof audio?.data === "string") {
        parts.push({ inlineData: { mimeType: `audio/${typeof audio.format === "string" ? audio.format : "wav"}`, data: audio.data } });
        return;
      }
      t.refuse(`${at}.content.${index}.type`, `content part type ${JSON.stringify(part.type)} has no equivalent in the Gemini API`);
    });
  }
  if (message.role === "assistant") {
    for (const call of message.tool_calls ?? []) {
      const { id, signature } = callIdParts(call.id);
      const part: Part = {
        functionCall: { ...(id ? { id } : {}), name: call.function.name, args: argumentsObject(call.function.arguments) },
      };
      if (signature) part.thoughtSignature = signature;
      parts.push(part);
    }
  }
  return parts;
}

function mimeOf(url: string): string {
  const extension = /\.([a-z0-9]+)(?:[?#]|$)/i.exec(url)?.[1]?.toLowerCase();
  if (extension === "png") return "image/png";
  if (extension === "webp") return "image/webp";
  if (extension === "gif") return "image/gif";
  return "image/jpeg";
}

/** `finishReason` → `finish_reason` (docs/providers.md); a turn that called functions ends with `tool_calls`. */
export function geminiFinish(reason: string | undefined, calledTools: boolean): FinishReason {
  switch (reason) {
    case "MAX_TOKENS":
      return "length";
    case "SAFETY":
    case "RECITATION":
    case "BLOCKLIST":
    case "PROHIBITED_CONTENT":
    case "SPII":
    case "IMAGE_SAFETY":
      return "content_filter";
    default:
      return calledTools ? "tool_calls" : "stop";
  }
}

function usageOf(metadata: GeminiResponse["usageMetadata"]): Usage | undefined {
  if (!metadata) return undefined;
  const usage = usageFrom(metadata.promptTokenCount ?? 0, (metadata.candidatesTokenCount ?? 0) + (metadata.thoughtsTokenCount ?? 0));
  if (metadata.cachedContentTokenCount) usage.prompt_tokens_details = { cached_tokens: metadata.cachedContentTokenCount };
  if (metadata.thoughtsTokenCount) usage.completion_tokens_details = { reasoning_tokens: metadata.thoughtsTokenCount };
  return usage;
}

function toolCallOf(part: Part): ToolCall | undefined {
  const call = part.functionCall as { name?: unknown; args?: unknown; id?: unknown } | undefined;
  if (!call || typeof call.name !== "string") return undefined;
  // Gemini 3 gives every call an id; for a call without one, an id is made up (MADE_UP_ID).
  let id = typeof call.id === "string" && call.id ? call.id : `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`;
  if (typeof part.thoughtSignature === "string") id += SIGNATURE + part.thoughtSignature;
  return { id, type: "function", function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) } };
}

/** Visible text of parts (thought summaries are left out). */
function textOfParts(parts: Part[] | undefined): string {
  return (parts ?? []).map((part) => (typeof part.text === "string" && part.thought !== true ? part.text : "")).join("");
}

/** Thought summaries of parts (`includeThoughts`): the answer's reasoning text. */
function thoughtsOf(parts: Part[] | undefined): string {
  return (parts ?? []).map((part) => (typeof part.text === "string" && part.thought === true ? part.text : "")).join("");
}

function completionOf(response: GeminiResponse, id: string): ChatCompletion {
  if (!response || typeof response !== "object") throw invalidAnswer(id);
  const candidate = response.candidates?.[0];
  if (!candidate && !response.promptFeedback) throw invalidAnswer(id);
  const parts = candidate?.content?.parts ?? [];
  const toolCalls = parts.map(toolCallOf).filter((call): call is ToolCall => call !== undefined);
  const text = textOfParts(parts);
  const reasoning = thoughtsOf(parts);
  const finish: FinishReason = candidate ? geminiFinish(candidate.finishReason, toolCalls.length > 0) : "content_filter";
  const completion: ChatCompletion = {
    id: response.responseId ?? `chatcmpl-${randomUUID()}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: response.modelVersion ?? id,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: text || (toolCalls.length ? null : ""),
          ...(reasoning ? { reasoning_content: reasoning } : {}),
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: finish,
      },
    ],
  };
  const usage = usageOf(response.usageMetadata);
  if (usage) completion.usage = usage;
  return completion;
}

/**
 * Each SSE event is a whole `GenerateContentResponse`; the stream has no [DONE], its end is the
 * end. Frames are made as the bytes arrive (shared.ts `upstreamEvents`).
 */
function streamChunks(id: string): UpstreamEventHandlers {
  let frames: ChunkFrames | undefined;
  let roleSent = false;
  let finished = false;
  let tools = 0;
  let usage: Usage | undefined;
  return {
    event(data, push) {
      let response: GeminiResponse;
      try {
        response = JSON.parse(data) as GeminiResponse;
      } catch {
        throw invalidAnswer(id);
      }
      if (response.error) {
        const code = Number((response.error as { code?: unknown }).code);
        const status = Number.isInteger(code) && code >= 400 ? code : 502;
        throw new ProviderError("UPSTREAM", messageOf(response, status), {
          status,
          upstreamStatus: status,
          upstreamBody: response,
          retryable: isRetryableStatus(status),
        });
      }
      frames ??= new ChunkFrames(response.responseId ?? `chatcmpl-${randomUUID()}`, response.modelVersion ?? id);
      const role = () => {
        if (roleSent) return {};
        roleSent = true;
        return { role: "assistant" };
      };
      usage = usageOf(response.usageMetadata) ?? usage;
      const candidate = response.candidates?.[0];
      const parts = candidate?.content?.parts ?? [];
      const reasoning = thoughtsOf(parts);
      if (reasoning) push(frames.delta({ ...role(), reasoning_content: reasoning }));
      const text = textOfParts(parts);
      if (text) push(frames.delta({ ...role(), content: text }));
      for (const part of parts) {
        const call = toolCallOf(part);
        if (!call) continue;
        // Gemini sends each call whole: one delta carries its id, name and arguments.
        push(frames.delta({ ...role(), tool_calls: [{ index: tools++, ...call }] }));
      }
      const blocked = !candidate && response.promptFeedback?.blockReason;
      if ((candidate?.finishReason || blocked) && !finished) {
        finished = true;
        push(frames.delta(role(), blocked ? "content_filter" : geminiFinish(candidate!.finishReason, tools > 0)));
      }
    },
    end(push) {
      if (!finished || !frames) throw streamCut(id);
      if (usage) push(frames.usage(usage));
    },
  };
}
