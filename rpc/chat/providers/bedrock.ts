import { randomUUID } from "node:crypto";
import { EventStreamCodec, type Message } from "@smithy/eventstream-codec";
import { Hash } from "@smithy/hash-node";
import { SignatureV4 } from "@smithy/signature-v4";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";
import { addSecret } from "../../outbound/secrets.js";
import type { Framing } from "../../sse-parse.js";
import type { BedrockModelConfig } from "../models-config.js";
import { Translation, applyMatrix } from "../translate/matrix.js";
import { anthropicThinking } from "../translate/reasoning.js";
import { FORMAT_TOOL, formatTool, unwrapFormatTool } from "../translate/structured.js";
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
import { ProviderError, isRetryableStatus } from "./provider-error.js";
import {
  ChunkFrames,
  argumentsObject,
  declaredTools,
  fileDataOf,
  upstreamFrames,
  type UpstreamFrameHandlers,
  imageUrlOf,
  invalidAnswer,
  isSystem,
  parseDataUrl,
  post,
  type PostOptions,
  readJson,
  stopList,
  streamCut,
  textOf,
  trimSlash,
  usageFrom,
} from "./shared.js";

export interface BedrockProviderOptions {
  id: string;
  config: BedrockModelConfig;
  timeoutSeconds: number;
  env: Record<string, string | undefined>;
}

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** The standard AWS environment variables (docs/providers.md), read at request time. */
export function bedrockCredentials(env: Record<string, string | undefined>): AwsCredentials | undefined {
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey) return undefined;
  // Never echoed to a client or a log (rpc/outbound/secrets.ts).
  addSecret(secretAccessKey);
  addSecret(env.AWS_SESSION_TOKEN);
  return { accessKeyId, secretAccessKey, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) };
}

const codec = new EventStreamCodec(toUtf8, fromUtf8);

/**
 * Amazon Bedrock's Converse API (docs/providers.md): `POST <endpoint>/model/<modelId>/converse`
 * and `/converse-stream`, signed with SigV4 (service `bedrock`) from the standard AWS
 * environment variables. Messages become `messages` with content blocks, `system` messages
 * `system`, tools `toolConfig`, tool calls and results `toolUse` / `toolResult` blocks. The
 * stream is AWS's binary event stream, decoded frame by frame into `chat.completion.chunk`s.
 */
/** SigV4 for Bedrock's runtime in `region`. */
export function bedrockSigner(region: string, credentials: AwsCredentials): SignatureV4 {
  return new SignatureV4({ service: "bedrock", region, credentials, sha256: Hash.bind(null, "sha256") });
}

/** A POST of `body` to `path` on `base`, signed by `signer` (chat's Converse and embeddings' InvokeModel). */
export async function signedPost(
  signer: SignatureV4,
  base: URL,
  path: string,
  options: Omit<PostOptions, "url" | "body"> & { body: string },
): Promise<Awaited<ReturnType<typeof post>>> {
  const signed = await signer.sign({
    method: "POST",
    protocol: base.protocol,
    hostname: base.hostname,
    port: base.port ? Number(base.port) : undefined,
    path,
    query: {},
    headers: options.headers,
    body: options.body,
  });
  return post({ ...options, url: `${base.origin}${path}`, headers: signed.headers });
}

export class BedrockProvider implements Provider {
  readonly #options: BedrockProviderOptions;

  constructor(options: BedrockProviderOptions) {
    this.#options = options;
  }

  async complete(request: ChatRequest, signal: AbortSignal, trace: { traceparent?: string } = {}): Promise<ProviderResult> {
    const { config, id, env } = this.#options;
    const timeoutMs = (config.timeoutSeconds ?? this.#options.timeoutSeconds) * 1000;
    const credentials = bedrockCredentials(env);
    if (!credentials)
      throw new ProviderError("UNAVAILABLE", `Chat service not configured: model ${id} needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`, {
        retryable: false,
      });
    const region = config.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
    if (!region)
      throw new ProviderError("UNAVAILABLE", `Chat service not configured: model ${id} needs a region (region or AWS_REGION)`, {
        retryable: false,
      });
    const base = new URL(trimSlash(config.baseURL ?? `https://bedrock-runtime.${region}.amazonaws.com`));
    const path = `${base.pathname.replace(/\/+$/, "")}/model/${encodeURIComponent(config.upstreamModel ?? id)}/${request.stream ? "converse-stream" : "converse"}`;
    const t = new Translation("bedrock", id, config);
    const upstreamModel = config.upstreamModel ?? id;
    const emulated = emulatesFormat(request, config.structuredOutput);
    const body = JSON.stringify(bedrockRequest(request, t, { model: upstreamModel, structuredOutput: config.structuredOutput }));
    const headers: Record<string, string> = {
      host: base.host,
      "content-type": "application/json",
      accept: request.stream ? "application/vnd.amazon.eventstream" : "application/json",
    };
    const signer = bedrockSigner(region, credentials);
    const response = await signedPost(signer, base, path, { id, headers, body, signal, timeoutMs, traceparent: trace.traceparent });
    let result: ProviderResult = !request.stream
      ? { kind: "completion", completion: completionOf(await readJson<ConverseResponse>(response, timeoutMs, id), id) }
      : { kind: "stream", chunks: upstreamFrames(response.body, eventStreamFraming(), timeoutMs, id, signal, streamChunks(id)) };
    if (emulated) result = unwrapFormatTool(result, request.response_format!);
    return t.warnings.length ? { ...result, warnings: t.warnings } : result;
  }
}

/** Structured output asked for with a forced tool call: `json_object` always, `json_schema` when the model config says so. */
function emulatesFormat(request: ChatRequest, mode: "native" | "tool"): boolean {
  const type = request.response_format?.type;
  return type === "json_object" || (type === "json_schema" && mode === "tool");
}

/** Anthropic's models on Bedrock take `thinking` in `additionalModelRequestFields`. */
const ANTHROPIC_MODEL = /(^|[.:/])anthropic\.claude/;

type Block = Record<string, unknown>;
interface ConverseUsage {
  inputTokens?: number;
  outputTokens?: number;
  cacheReadInputTokens?: number;
  cacheWriteInputTokens?: number;
}
interface ConverseResponse {
  output?: { message?: { role?: string; content?: Block[] } };
  stopReason?: string;
  usage?: ConverseUsage;
}

/** The canonical request as a Converse body (docs/dialects.md "The matrix", column bedrock). */
export function bedrockRequest(
  request: ChatRequest,
  t: Translation = new Translation("bedrock", request.model),
  options: { model?: string; structuredOutput?: "native" | "tool" } = {},
): Record<string, unknown> {
  const r = applyMatrix(request, t);
  // System messages anywhere in the conversation are merged, in order, into `system`.
  const system = r.messages
    .filter(isSystem)
    .map((message) => textOf(message.content))
    .filter(Boolean);
  const messages: { role: "user" | "assistant"; content: Block[] }[] = [];
  r.messages.forEach((message, index) => {
    if (isSystem(message)) return;
    if (message.role !== "user" && message.role !== "assistant" && message.role !== "tool")
      t.refuse(`messages.${index}.role`, `${message.role} has no equivalent in the Converse API`);
    const role = message.role === "assistant" ? "assistant" : "user";
    const blocks = blocksOf(message, `messages.${index}`, t);
    if (!blocks.length) return;
    const last = messages.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  });
  const body: Record<string, unknown> = { messages };
  if (system.length) body.system = system.map((text) => ({ text }));
  const inference: Record<string, unknown> = {};
  if (r.max_tokens !== undefined) inference.maxTokens = r.max_tokens;
  if (r.temperature !== undefined) inference.temperature = r.temperature;
  if (r.top_p !== undefined) inference.topP = r.top_p;
  const stop = stopList(r.stop);
  if (stop) inference.stopSequences = stop;
  if (Object.keys(inference).length) body.inferenceConfig = inference;
  const metadata = { ...r.metadata, ...(r.user !== undefined ? { user: r.user } : {}) };
  if (Object.keys(metadata).length) body.requestMetadata = metadata;
  if (r.reasoning_effort !== undefined) {
    if (!ANTHROPIC_MODEL.test(options.model ?? r.model))
      t.drop("reasoning_effort", "only Anthropic models on Bedrock take a thinking budget");
    else {
      const thinking = anthropicThinking(r.reasoning_effort, r.reasoning_budget, r.max_tokens ?? 4096);
      if (thinking) body.additionalModelRequestFields = { thinking };
      else t.drop("reasoning_effort", "maxTokens leaves no room for a thinking budget (at least 1024 tokens)");
    }
  }
  let { tools, fromHistory } = declaredTools(r);
  let forced: ToolChoice | undefined;
  const format = r.response_format;
  if (format && format.type !== "text") {
    if (format.type === "json_schema" && options.structuredOutput !== "tool") {
      body.outputConfig = {
        textFormat: {
          type: "json_schema",
          structure: {
            jsonSchema: {
              name: format.json_schema.name,
              schema: JSON.stringify(format.json_schema.schema ?? { type: "object" }),
              ...(format.json_schema.description ? { description: format.json_schema.description } : {}),
            },
          },
        },
      };
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
  // "none" with no tool turns in the history: the tools are left out, which is what "none" asks.
  const none = !forced && r.tool_choice === "none";
  if (none && !fromHistory && !r.messages.some((message) => message.role === "tool" || message.tool_calls?.length)) return body;
  if (tools.length) {
    const toolConfig: Record<string, unknown> = {
      tools: tools.map((tool) => ({
        toolSpec: {
          name: tool.function.name,
          ...(tool.function.description ? { description: tool.function.description } : {}),
          inputSchema: { json: tool.function.parameters ?? { type: "object", properties: {} } },
        },
      })),
    };
    if (none) t.drop("tool_choice", 'Converse has no "none" choice; the tools of the conversation\'s earlier calls are sent');
    const choice = fromHistory ? undefined : toolChoiceOf(forced ?? r.tool_choice);
    if (choice) toolConfig.toolChoice = choice;
    body.toolConfig = toolConfig;
  }
  return body;
}

/** Converse has no "none" (handled by the caller). */
function toolChoiceOf(choice: ToolChoice | undefined): Record<string, unknown> | undefined {
  if (choice === "auto") return { auto: {} };
  if (choice === "required") return { any: {} };
  if (choice && typeof choice === "object") return { tool: { name: choice.function.name } };
  return undefined;
}

const IMAGE_FORMATS: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpeg",
  "image/jpg": "jpeg",
  "image/gif": "gif",
  "image/webp": "webp",
};

function blocksOf(message: ChatMessage, at: string, t: Translation): Block[] {
  if (message.role === "tool") {
    return [{ toolResult: { toolUseId: message.tool_call_id ?? "", content: [{ text: textOf(message.content) }] } }];
  }
  const blocks: Block[] = [];
  if (typeof message.content === "string") {
    if (message.content) blocks.push({ text: message.content });
  } else {
    (message.content ?? []).forEach((part, index) => {
      const where = `${at}.content.${index}`;
      if (part.type === "text" && typeof part.text === "string") {
        if (part.text) blocks.push({ text: part.text });
        return;
      }
      // Converse takes image bytes (a data: URL), not a link to fetch.
      const url = imageUrlOf(part);
      if (url) {
        const data = parseDataUrl(url);
        const format = data ? IMAGE_FORMATS[data.mediaType.toLowerCase()] : undefined;
        if (!data || !format) t.refuse(where, "Converse takes images as data: URLs of PNG, JPEG, GIF or WebP, not links");
        blocks.push({ image: { format, source: { bytes: data.data } } });
        return;
      }
      const file = fileDataOf(part);
      const format = file ? DOCUMENT_FORMATS[file.mediaType.toLowerCase()] : undefined;
      if (file && format) {
        // A document's name is required, and only some characters are allowed in it.
        const name =
          (file.filename ?? `document ${index + 1}`)
            .replace(/\.[^.]*$/, "")
            .replace(/[^A-Za-z0-9 ()[\]-]/g, " ")
            .trim() || "document";
        blocks.push({ document: { format, name, source: { bytes: file.data } } });
        return;
      }
      t.refuse(`${where}.type`, `content part type ${JSON.stringify(part.type)} has no equivalent in the Converse API`);
    });
  }
  if (message.role === "assistant") {
    for (const call of message.tool_calls ?? [])
      blocks.push({ toolUse: { toolUseId: call.id, name: call.function.name, input: argumentsObject(call.function.arguments) } });
  }
  return blocks;
}

/** Document formats Converse reads, by media type. */
const DOCUMENT_FORMATS: Record<string, string> = {
  "application/pdf": "pdf",
  "text/csv": "csv",
  "text/html": "html",
  "text/plain": "txt",
  "text/markdown": "md",
  "application/msword": "doc",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
  "application/vnd.ms-excel": "xls",
  "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
};

/** `stopReason` → `finish_reason` (docs/providers.md). */
export function bedrockFinish(reason: string | undefined): FinishReason {
  switch (reason) {
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length";
    case "tool_use":
      return "tool_calls";
    case "guardrail_intervened":
    case "content_filtered":
      return "content_filter";
    default:
      return "stop";
  }
}

function usageOf(usage: ConverseUsage | undefined): Usage | undefined {
  if (!usage) return undefined;
  const out = usageFrom(
    (usage.inputTokens ?? 0) + (usage.cacheReadInputTokens ?? 0) + (usage.cacheWriteInputTokens ?? 0),
    usage.outputTokens ?? 0,
  );
  const cached = usage.cacheReadInputTokens ?? 0;
  const created = usage.cacheWriteInputTokens ?? 0;
  if (cached || created)
    out.prompt_tokens_details = { ...(cached ? { cached_tokens: cached } : {}), ...(created ? { cache_creation_tokens: created } : {}) };
  return out;
}

/** A reasoning block's text (`reasoningContent.reasoningText.text`). */
function reasoningOf(block: Block): string {
  const text = (block.reasoningContent as { reasoningText?: { text?: unknown } } | undefined)?.reasoningText?.text;
  return typeof text === "string" ? text : "";
}

function completionOf(response: ConverseResponse, id: string): ChatCompletion {
  const content = response?.output?.message?.content;
  if (!Array.isArray(content)) throw invalidAnswer(id);
  let text = "";
  let reasoning = "";
  const toolCalls: ToolCall[] = [];
  for (const block of content) {
    if (typeof block.text === "string") text += block.text;
    reasoning += reasoningOf(block);
    const use = block.toolUse as { toolUseId?: unknown; name?: unknown; input?: unknown } | undefined;
    if (use)
      toolCalls.push({
        id: String(use.toolUseId),
        type: "function",
        function: { name: String(use.name), arguments: JSON.stringify(use.input ?? {}) },
      });
  }
  const completion: ChatCompletion = {
    id: `chatcmpl-${randomUUID()}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: id,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: text || (toolCalls.length ? null : ""),
          ...(reasoning ? { reasoning_content: reasoning } : {}),
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: bedrockFinish(response.stopReason),
      },
    ],
  };
  const usage = usageOf(response.usage);
  if (usage) completion.usage = usage;
  return completion;
}

/** Status of an exception inside the stream, by its `:exception-type` (docs/providers.md). */
const EXCEPTION_STATUS: Record<string, number> = {
  validationException: 400,
  accessDeniedException: 403,
  resourceNotFoundException: 404,
  modelTimeoutException: 408,
  modelStreamErrorException: 424,
  throttlingException: 429,
  internalServerException: 500,
  serviceUnavailableException: 503,
};

/** AWS event-stream messages, each led by its 4-byte big-endian total length (rpc/sse-parse.ts `Framing`). */
function eventStreamFraming(): Framing<Message> {
  let buffer: Buffer = Buffer.alloc(0);
  return {
    bytes(chunk, take) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      buffer = buffer.length ? Buffer.concat([buffer, bytes]) : bytes;
      while (buffer.length >= 4) {
        const total = buffer.readUInt32BE(0);
        if (total < 16 || total > 16 * 1024 * 1024) throw new Error(`invalid event stream frame length ${total}`);
        if (buffer.length < total) break;
        const message = codec.decode(new Uint8Array(buffer.buffer, buffer.byteOffset, total));
        buffer = buffer.subarray(total);
        if (!take(message)) return;
      }
    },
    // A message cut off by the body's end is not one: whether the answer was whole is `end`'s call.
    end() {},
  };
}

function headerOf(message: Message, name: string): string | undefined {
  const header = message.headers[name];
  return header && header.type === "string" ? header.value : undefined;
}

/** ConverseStream events → `chat.completion.chunk` frames, made as the bytes arrive (shared.ts `upstreamFrames`). */
function streamChunks(id: string): UpstreamFrameHandlers<Message> {
  const frames = new ChunkFrames(`chatcmpl-${randomUUID()}`, id);
  let roleSent = false;
  let finished = false;
  let usageSent = false;
  /** Content block index → index among the tool calls. */
  const tools = new Map<number, number>();
  /** Tool calls whose input has started. */
  const argued = new Set<number>();
  const role = () => {
    if (roleSent) return {};
    roleSent = true;
    return { role: "assistant" };
  };
  return {
    event(frame, push) {
      const kind = headerOf(frame, ":message-type");
      // biome-ignore lint/suspicious/noExplicitAny: a provider's stream event, read field by field with checks
      let payload: Record<string, any> = {};
      try {
        const text = toUtf8(frame.body);
        // biome-ignore lint/suspicious/noExplicitAny: as above
        if (text) payload = JSON.parse(text) as Record<string, any>;
      } catch {
        if (kind === "event") throw invalidAnswer(id);
      }
      if (kind === "exception" || kind === "error") {
        const type = headerOf(frame, ":exception-type") ?? headerOf(frame, ":error-code") ?? "internalServerException";
        const status = EXCEPTION_STATUS[type] ?? 502;
        const message = typeof payload.message === "string" ? payload.message : (headerOf(frame, ":error-message") ?? type);
        throw new ProviderError("UPSTREAM", message, {
          status,
          upstreamStatus: status,
          upstreamBody: { message, type },
          retryable: isRetryableStatus(status),
        });
      }
      switch (headerOf(frame, ":event-type")) {
        case "contentBlockStart": {
          const use = payload.start?.toolUse as { toolUseId?: unknown; name?: unknown } | undefined;
          if (use) {
            const index = tools.size;
            tools.set(Number(payload.contentBlockIndex), index);
            push(
              frames.delta({
                ...role(),
                tool_calls: [{ index, id: String(use.toolUseId), type: "function", function: { name: String(use.name), arguments: "" } }],
              }),
            );
          }
          break;
        }
        case "contentBlockDelta": {
          const delta = payload.delta as
            | { text?: unknown; toolUse?: { input?: unknown }; reasoningContent?: { text?: unknown } }
            | undefined;
          if (typeof delta?.text === "string" && delta.text) push(frames.delta({ ...role(), content: delta.text }));
          else if (typeof delta?.reasoningContent?.text === "string" && delta.reasoningContent.text)
            push(frames.delta({ ...role(), reasoning_content: delta.reasoningContent.text }));
          else if (typeof delta?.toolUse?.input === "string" && delta.toolUse.input) {
            const index = tools.get(Number(payload.contentBlockIndex));
            if (index !== undefined) {
              argued.add(index);
              push(frames.delta({ tool_calls: [{ index, function: { arguments: delta.toolUse.input } }] }));
            }
          }
          break;
        }
        case "contentBlockStop": {
          // A tool without parameters streams no input: its arguments are "{}", as in a JSON answer.
          const index = tools.get(Number(payload.contentBlockIndex));
          if (index !== undefined && !argued.has(index)) {
            argued.add(index);
            push(frames.delta({ tool_calls: [{ index, function: { arguments: "{}" } }] }));
          }
          break;
        }
        case "messageStop":
          if (!finished) {
            finished = true;
            push(frames.delta(role(), bedrockFinish(payload.stopReason)));
          }
          break;
        case "metadata": {
          const usage = usageOf(payload.usage);
          if (usage && finished && !usageSent) {
            usageSent = true;
            push(frames.usage(usage));
          }
          break;
        }
        default:
          // messageStart, and events this translation does not use.
          break;
      }
    },
    // A stream that ends before the message stopped was cut off: the client sees an error frame, no [DONE].
    end() {
      if (!finished) throw streamCut(id);
    },
  };
}
