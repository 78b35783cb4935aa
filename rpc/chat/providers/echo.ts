import { randomUUID } from "node:crypto";
import { contentText, countPromptTokens, countTokens, usageOf } from "../tokens.js";
import { Translation, applyMatrix } from "../translate/matrix.js";
import { exampleOf } from "../translate/structured.js";
import type { ChatChunk, ChatRequest, Provider, ProviderResult, ToolCall } from "../types.js";
import { stopList } from "./shared.js";

/**
 * The built-in model: no network, answers with the last user message, word by word when
 * streaming, with real token counts (rpc/models/tokens.ts). The default so that `npm start`
 * serves chat with nothing configured, and a fixed point for tests and benchmarks.
 */
export class EchoProvider implements Provider {
  readonly #model: string;

  constructor(model: string) {
    this.#model = model;
  }

  async complete(input: ChatRequest, signal: AbortSignal): Promise<ProviderResult> {
    // The matrix's echo column (docs/dialects.md): refusals and the tools it cannot run.
    const t = new Translation("echo", this.#model);
    const request = applyMatrix(input, t);
    const result = this.#answer(request, signal);
    return t.warnings.length ? { ...result, warnings: t.warnings } : result;
  }

  #answer(request: ChatRequest, signal: AbortSignal): ProviderResult {
    const call = request.tools?.length ? toolCallOf(request) : undefined;
    if (call) return toolCallResult(this.#model, request, call);
    const { words, finishReason } = request.tools?.length ? (toolAnswer(request) ?? answer(request)) : answer(request);
    // Reasoning asked for: a short reasoning text first, counted as output like the answer.
    const reasoning = request.reasoning_effort && request.reasoning_effort !== "none" ? REASONING : undefined;
    const usage = usageOf(countPromptTokens(request.messages), countTokens(words.join("")) + (reasoning ? countTokens(reasoning) : 0));
    if (reasoning) usage.completion_tokens_details = { reasoning_tokens: countTokens(reasoning) };
    const id = `chatcmpl-${randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    if (!request.stream) {
      return {
        kind: "completion",
        completion: {
          id,
          object: "chat.completion",
          created,
          model: this.#model,
          choices: [
            {
              index: 0,
              message: { role: "assistant", content: words.join(""), ...(reasoning ? { reasoning_content: reasoning } : {}) },
              finish_reason: finishReason,
            },
          ],
          usage,
        },
      };
    }
    const model = this.#model;
    const frame = (choices: ChatChunk["choices"], extra: Partial<ChatChunk> = {}): ChatChunk => ({
      id,
      object: "chat.completion.chunk",
      created,
      model,
      choices,
      usage: null,
      ...extra,
    });
    async function* chunks(): AsyncGenerator<ChatChunk> {
      yield frame([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]);
      if (reasoning) yield frame([{ index: 0, delta: { reasoning_content: reasoning }, finish_reason: null }]);
      for (const word of words) {
        if (signal.aborted) return;
        yield frame([{ index: 0, delta: { content: word }, finish_reason: null }]);
      }
      yield frame([{ index: 0, delta: {}, finish_reason: finishReason }]);
      yield frame([], { usage });
    }
    return { kind: "stream", chunks: chunks() };
  }
}

/** The reasoning text the echo model gives when asked to reason. */
const REASONING = "The answer repeats the last user message.";

/**
 * The last user message split into words (each keeps its leading space), cut before the first
 * stop sequence and at max_tokens. With a `response_format`, the answer is a JSON value of it
 * built from that message (rpc/chat/translate/structured.ts `exampleOf`).
 */
function answer(request: ChatRequest): { words: string[]; finishReason: "stop" | "length" } {
  const lastUser = [...request.messages].reverse().find((message) => message.role === "user");
  let text = contentText(lastUser?.content ?? "").trim() || "(empty message)";
  const format = request.response_format;
  if (format?.type === "json_schema") text = JSON.stringify(exampleOf(format.json_schema.schema ?? { type: "object" }, text));
  else if (format?.type === "json_object") text = JSON.stringify({ text });
  for (const stop of stopList(request.stop) ?? []) {
    const at = stop ? text.indexOf(stop) : -1;
    if (at >= 0) text = text.slice(0, at);
  }
  const words = text.match(/\s*\S+/g) ?? [];
  if (request.max_tokens === undefined) return { words, finishReason: "stop" };
  const kept: string[] = [];
  let tokens = 0;
  for (const word of words) {
    tokens += countTokens(word);
    if (tokens > request.max_tokens) return { words: kept, finishReason: "length" };
    kept.push(word);
  }
  return { words: kept, finishReason: "stop" };
}

/**
 * Tool calling with no network, for agent runs and for clients of the Account and Gateway
 * surfaces (docs/models-and-chat.md "Tool calls"): a last user message
 * `/tool <name> {json args}` naming an offered tool becomes that tool call; after tool
 * results, the answer is their text.
 */
const TOOL_DIRECTIVE = /^\/tool\s+(\S+)\s*([\s\S]*)$/;

function toolCallOf(request: ChatRequest): ToolCall | undefined {
  const last = request.messages.at(-1);
  if (last?.role !== "user") return undefined;
  const match = TOOL_DIRECTIVE.exec(contentText(last.content).trim());
  if (!match || !request.tools!.some((tool) => tool.function.name === match[1])) return undefined;
  return { id: `call_${randomUUID().slice(0, 8)}`, type: "function", function: { name: match[1]!, arguments: match[2]!.trim() || "{}" } };
}

function toolAnswer(request: ChatRequest): { words: string[]; finishReason: "stop" } | undefined {
  const results: string[] = [];
  for (let i = request.messages.length - 1; i >= 0 && request.messages[i]!.role === "tool"; i--)
    results.unshift(contentText(request.messages[i]!.content));
  if (!results.length) return undefined;
  return { words: results.join("\n").match(/\s*\S+/g) ?? [], finishReason: "stop" };
}

function toolCallResult(model: string, request: ChatRequest, call: ToolCall): ProviderResult {
  const usage = usageOf(countPromptTokens(request.messages), countTokens(call.function.name + call.function.arguments));
  const id = `chatcmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  if (!request.stream) {
    return {
      kind: "completion",
      completion: {
        id,
        object: "chat.completion",
        created,
        model,
        choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls: [call] }, finish_reason: "tool_calls" }],
        usage,
      },
    };
  }
  const frame = (choices: ChatChunk["choices"], extra: Partial<ChatChunk> = {}): ChatChunk => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices,
    usage: null,
    ...extra,
  });
  async function* chunks(): AsyncGenerator<ChatChunk> {
    yield frame([{ index: 0, delta: { role: "assistant", content: null, tool_calls: [{ index: 0, ...call }] }, finish_reason: null }]);
    yield frame([{ index: 0, delta: {}, finish_reason: "tool_calls" }]);
    yield frame([], { usage });
  }
  return { kind: "stream", chunks: chunks() };
}
