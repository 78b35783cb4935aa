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
    const call = request.tools?.length ? (toolCallOf(request) ?? forcedCallOf(request)) : undefined;
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

/** The JSON object a message is, or carries from its first `{` to its last `}`: echoed as the JSON-mode answer. */
function jsonObjectIn(text: string): string | undefined {
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  if (start < 0 || end <= start) return undefined;
  try {
    const value: unknown = JSON.parse(text.slice(start, end + 1));
    return value && typeof value === "object" && !Array.isArray(value) ? JSON.stringify(value) : undefined;
  } catch {
    return undefined;
  }
}

/** The reasoning text the echo model gives when asked to reason. */
const REASONING = "The answer repeats the last user message.";

/**
 * The last user message split into words (each keeps its leading space), cut before the first
 * stop sequence and at max_tokens. With a `json_schema` format, the answer is a JSON value of
 * the schema built from that message (rpc/chat/translate/structured.ts `exampleOf`); in JSON
 * mode (`json_object`), the JSON object the message carries, else `{"text": <message>}`.
 */
function answer(request: ChatRequest): { words: string[]; finishReason: "stop" | "length" } {
  const lastUser = [...request.messages].reverse().find((message) => message.role === "user");
  let text = contentText(lastUser?.content ?? "").trim() || "(empty message)";
  const format = request.response_format;
  if (format?.type === "json_schema") text = JSON.stringify(exampleOf(format.json_schema.schema ?? { type: "object" }, text));
  else if (format?.type === "json_object") text = jsonObjectIn(text) ?? JSON.stringify({ text });
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
 * surfaces (docs/models-and-chat.md "Tool calls"): when the last turn (system turns after it
 * aside) is a user turn with a line `/tool <name> {json args}` naming an offered tool, its last
 * such line becomes that tool call (clients such as Claude Code and Codex put their own text
 * before the prompt in the same turn); after tool results, the answer is their text.
 */
const TOOL_DIRECTIVE = /^\/tool\s+(\S+)\s*([\s\S]*)$/;

/** The conversation without the system turns at its end (Claude Code puts one after the user's turn). */
function turns(request: ChatRequest): ChatRequest["messages"] {
  let end = request.messages.length;
  while (end > 0 && (request.messages[end - 1]!.role === "system" || request.messages[end - 1]!.role === "developer")) end--;
  return request.messages.slice(0, end);
}

function toolCallOf(request: ChatRequest): ToolCall | undefined {
  const last = turns(request).at(-1);
  if (last?.role !== "user") return undefined;
  const lines = contentText(last.content)
    .split("\n")
    .map((line) => line.trim());
  for (let i = lines.length - 1; i >= 0; i--) {
    const match = TOOL_DIRECTIVE.exec(lines[i]!);
    if (!match || !request.tools!.some((tool) => tool.function.name === match[1])) continue;
    return { id: `call_${randomUUID().slice(0, 8)}`, type: "function", function: { name: match[1]!, arguments: match[2]!.trim() || "{}" } };
  }
  return undefined;
}

/**
 * A tool the request forces (`tool_choice` naming one, or `required`), when no tool result ends
 * the conversation: called with an example of its parameters built from the last user message
 * (the JSON object the message carries, for parameters that are an open object), as a model
 * told to call it would, so clients that ask for structured output through a forced tool call
 * (LangChain's ChatAnthropic, the AI SDK's Anthropic provider) get an answer.
 */
function forcedCallOf(request: ChatRequest): ToolCall | undefined {
  const choice = request.tool_choice;
  const messages = turns(request);
  if (!choice || choice === "auto" || choice === "none" || messages.at(-1)?.role === "tool") return undefined;
  const tool = typeof choice === "object" ? request.tools!.find((spec) => spec.function.name === choice.function.name) : request.tools![0];
  if (!tool) return undefined;
  const last = [...messages].reverse().find((message) => message.role === "user");
  const text = contentText(last?.content ?? "").trim();
  const parameters = tool.function.parameters ?? { type: "object" };
  const open = !parameters.properties || typeof parameters.properties !== "object";
  const carried = open ? jsonObjectIn(text) : undefined;
  const input = carried ?? JSON.stringify(exampleOf(parameters, text));
  return { id: `call_${randomUUID().slice(0, 8)}`, type: "function", function: { name: tool.function.name, arguments: input } };
}

function toolAnswer(request: ChatRequest): { words: string[]; finishReason: "stop" } | undefined {
  const messages = turns(request);
  const results: string[] = [];
  for (let i = messages.length - 1; i >= 0 && messages[i]!.role === "tool"; i--) results.unshift(contentText(messages[i]!.content));
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
