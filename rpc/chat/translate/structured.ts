import { layered } from "../../layers.js";
import type { ChatChunk, ChatCompletion, ProviderResult, ResponseFormat, ToolChoice, ToolSpec } from "../types.js";

/**
 * Structured output across dialects and providers (docs/dialects.md "Structured output"): the
 * chat format's `response_format` is the canonical form; a provider without a native form is
 * asked for a forced call of one tool whose parameters are the schema, as the AI SDK does, and
 * that call is answered as the message's text, so every dialect's answer keeps its shape
 * (`message.content` and `message.parsed`, `output_text`, a `text` block).
 */

/** The tool of the emulation; a client's own tool of this name is refused with it. */
export const FORMAT_TOOL = "structured_output";

/** The schema a format asks for; `json_object` asks for any object. */
export function schemaOf(format: ResponseFormat): Record<string, unknown> | undefined {
  if (format.type === "json_schema") return format.json_schema.schema ?? { type: "object" };
  if (format.type === "json_object") return { type: "object" };
  return undefined;
}

/**
 * The schema with every object closed (`additionalProperties: false` where it says nothing), as
 * Anthropic's and Bedrock's structured output require; an object left open on purpose stays so.
 */
export function closedSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closedSchema);
  if (!schema || typeof schema !== "object") return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    out[key] =
      key === "properties" || key === "$defs" || key === "definitions" || key === "patternProperties"
        ? Object.fromEntries(Object.entries((value as Record<string, unknown>) ?? {}).map(([name, sub]) => [name, closedSchema(sub)]))
        : key === "const" || key === "enum" || key === "default" || key === "examples"
          ? value
          : closedSchema(value);
  }
  const typed = out.type === "object" || (Array.isArray(out.type) && out.type.includes("object")) || out.properties !== undefined;
  if (typed && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

/** Tool inputs are objects: a schema of another type is wrapped in `{value}` and unwrapped in the answer. */
function wraps(schema: Record<string, unknown>): boolean {
  return schema.type !== "object";
}

/**
 * The tools and tool choice of an emulated format: the format's tool beside the client's own,
 * forced when it is alone (with other tools, some tool must be called; a call of the format's
 * tool is the answer).
 */
export function formatTool(
  format: ResponseFormat,
  tools: readonly ToolSpec[] | undefined,
): { tools: ToolSpec[]; tool_choice: ToolChoice } | undefined {
  const schema = schemaOf(format);
  if (!schema) return undefined;
  const parameters = wraps(schema)
    ? { type: "object", properties: { value: schema }, required: ["value"], additionalProperties: false }
    : schema;
  const description =
    format.type === "json_schema"
      ? `Give the answer${format.json_schema.description ? ` (${format.json_schema.description})` : ""} as this tool's input: it is the whole answer.`
      : "Give the answer as a JSON object, this tool's input: it is the whole answer.";
  const tool: ToolSpec = { type: "function", function: { name: FORMAT_TOOL, description, parameters } };
  if (!tools?.length) return { tools: [tool], tool_choice: { type: "function", function: { name: FORMAT_TOOL } } };
  return { tools: [...tools, tool], tool_choice: "required" };
}

/** The answer text of the format tool's arguments (a wrapped value unwrapped). */
function answerText(format: ResponseFormat, args: string): string {
  const schema = schemaOf(format)!;
  if (!wraps(schema)) return args;
  try {
    return JSON.stringify((JSON.parse(args) as { value?: unknown }).value ?? null);
  } catch {
    return args;
  }
}

/**
 * A provider's answer to an emulated format, as the client asked for it: the format tool's call
 * becomes the message's text and the turn ends with `stop`; other tool calls stay as they are.
 */
export function unwrapFormatTool(result: ProviderResult, format: ResponseFormat): ProviderResult {
  if (result.kind === "completion") return { ...result, completion: unwrapCompletion(result.completion, format) };
  return { ...result, chunks: unwrapChunks(result.chunks, format) };
}

function unwrapCompletion(completion: ChatCompletion, format: ResponseFormat): ChatCompletion {
  return {
    ...completion,
    choices: completion.choices.map((choice) => {
      const calls = choice.message.tool_calls ?? [];
      const answer = calls.find((call) => call.function.name === FORMAT_TOOL);
      if (!answer) return choice;
      const rest = calls.filter((call) => call !== answer);
      const { tool_calls: _calls, ...message } = choice.message;
      return {
        ...choice,
        message: {
          ...message,
          content: (message.content ?? "") + answerText(format, answer.function.arguments),
          ...(rest.length ? { tool_calls: rest } : {}),
        },
        finish_reason: rest.length ? choice.finish_reason : choice.finish_reason === "tool_calls" ? "stop" : choice.finish_reason,
      };
    }),
  };
}

/**
 * The stream with the format tool's argument deltas as content deltas. A wrapped value's
 * arguments are held to the end and given as one delta (the unwrapped text); an object's are
 * relayed as they come.
 */
function unwrapChunks(chunks: AsyncIterable<ChatChunk>, format: ResponseFormat): AsyncIterable<ChatChunk> {
  const wrapped = wraps(schemaOf(format)!);
  /** The format tool's index among the tool calls, once its first delta named it. */
  let formatIndex: number | undefined;
  let held = "";
  let otherCalls = false;
  return layered<ChatChunk, ChatChunk>(chunks[Symbol.asyncIterator](), {
    step(step) {
      if (step.done) return step;
      const chunk = step.value;
      const choice = chunk.choices?.[0];
      if (!choice?.delta?.tool_calls && !choice?.finish_reason) return step;
      let content = "";
      const calls = (choice.delta?.tool_calls ?? []).filter((call) => {
        if (call.function?.name === FORMAT_TOOL) formatIndex = call.index ?? 0;
        if ((call.index ?? 0) !== formatIndex) {
          otherCalls = true;
          return true;
        }
        content += call.function?.arguments ?? "";
        return false;
      });
      if (wrapped) {
        held += content;
        content = choice.finish_reason && formatIndex !== undefined ? answerText(format, held) : "";
      }
      const delta: NonNullable<NonNullable<ChatChunk["choices"]>[number]["delta"]> = { ...choice.delta };
      if (calls.length) delta.tool_calls = calls;
      else delete delta.tool_calls;
      if (content) delta.content = (delta.content ?? "") + content;
      const finish = choice.finish_reason === "tool_calls" && formatIndex !== undefined && !otherCalls ? "stop" : choice.finish_reason;
      return {
        done: false,
        value: { ...chunk, choices: [{ ...choice, delta, finish_reason: finish ?? null }, ...(chunk.choices?.slice(1) ?? [])] },
      };
    },
    error(error) {
      throw error;
    },
    stop(below) {
      return below();
    },
  });
}

/**
 * A JSON value of a schema, built without a model: what the echo model answers to a format
 * (docs/models-and-chat.md "The echo model"). Strings are the echoed text (or the first `enum`
 * value, a `const`, a date for `format: date-time`), numbers their minimum or 0, arrays one
 * item (or `minItems`), objects every property; `$ref`s to `#/$defs` and `#/definitions`,
 * `anyOf`, `oneOf` and `allOf` are followed. Depth is bounded so a recursive schema ends.
 */
export function exampleOf(schema: unknown, text: string): unknown {
  const root = (schema && typeof schema === "object" ? schema : {}) as Record<string, unknown>;
  const resolve = (node: Record<string, unknown>): Record<string, unknown> => {
    const ref = typeof node.$ref === "string" ? node.$ref : undefined;
    if (!ref?.startsWith("#/")) return node;
    let target: unknown = root;
    for (const part of ref.slice(2).split("/"))
      target = (target as Record<string, unknown> | undefined)?.[part.replaceAll("~1", "/").replaceAll("~0", "~")];
    return target && typeof target === "object" ? (target as Record<string, unknown>) : {};
  };
  const build = (raw: unknown, depth: number): unknown => {
    if (!raw || typeof raw !== "object") return null;
    const node = resolve(raw as Record<string, unknown>);
    if ("const" in node) return node.const;
    if (Array.isArray(node.enum) && node.enum.length) return node.enum[0];
    for (const key of ["anyOf", "oneOf"] as const) {
      const options = node[key];
      if (Array.isArray(options) && options.length) {
        const concrete = options.find((option) => (option as { type?: unknown })?.type !== "null") ?? options[0];
        return build(concrete, depth);
      }
    }
    if (Array.isArray(node.allOf) && node.allOf.length) {
      const merged: Record<string, unknown> = { ...node, allOf: undefined };
      for (const part of node.allOf) {
        const resolved = resolve(part as Record<string, unknown>);
        for (const [key, value] of Object.entries(resolved)) {
          if (key === "properties") merged.properties = { ...(merged.properties as object), ...(value as object) };
          else if (key === "required") merged.required = [...((merged.required as unknown[]) ?? []), ...(value as unknown[])];
          else merged[key] ??= value;
        }
      }
      return build(merged, depth);
    }
    const types = Array.isArray(node.type) ? node.type : [node.type];
    const type = types.find((entry) => entry !== "null") ?? (node.properties ? "object" : node.items ? "array" : "string");
    if (depth > 8) return type === "object" ? {} : type === "array" ? [] : type === "string" ? text : null;
    switch (type) {
      case "object": {
        const out: Record<string, unknown> = {};
        for (const [name, sub] of Object.entries((node.properties as Record<string, unknown>) ?? {})) out[name] = build(sub, depth + 1);
        return out;
      }
      case "array": {
        const count = Math.max(1, typeof node.minItems === "number" ? node.minItems : 1);
        return Array.from({ length: Math.min(count, 16) }, () => build(node.items ?? {}, depth + 1));
      }
      case "integer":
      case "number": {
        const min =
          typeof node.minimum === "number" ? node.minimum : typeof node.exclusiveMinimum === "number" ? node.exclusiveMinimum + 1 : 0;
        return type === "integer" ? Math.ceil(min) : min;
      }
      case "boolean":
        return false;
      case "null":
        return null;
      default:
        if (node.format === "date-time") return new Date(0).toISOString();
        if (node.format === "date") return "1970-01-01";
        if (node.format === "email") return "echo@example.com";
        if (node.format === "uri" || node.format === "url") return "https://example.com/";
        if (node.format === "uuid") return "00000000-0000-4000-8000-000000000000";
        return text;
    }
  };
  return build(root, 0);
}
