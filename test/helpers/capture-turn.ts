/**
 * What the capture server (test/helpers/capture-server.ts) answers a client, decided from the
 * request alone so that every client can finish its scenario (docs/clients.md "Golden
 * fixtures"), in dialect-neutral terms that test/helpers/capture-answers.ts renders:
 *
 * 1. after a tool result (the conversation's last turn), a text that quotes it;
 * 2. a forced tool (`tool_choice` naming one, or `required`/`any` with one tool), a call to it
 *    with arguments made from its schema (LangChain's and the AI SDK's structured output by tool);
 * 3. a requested JSON schema (`response_format`, `text.format`, `output_config.format`), a JSON
 *    text that satisfies it; JSON mode without a schema (`json_object`), the last user turn when
 *    it is JSON (as the echo model would answer), `{}` otherwise;
 * 4. a marker `[[call:NAME {json}]]` in the last user turn, or the echo model's directive
 *    `/tool NAME {json}` as the whole of it (docs/models-and-chat.md "Tool calls"), naming an
 *    offered tool: a call to that tool with those arguments (or arguments made from its schema);
 * 5. otherwise a short text.
 */
export type Dialect = "chat" | "responses" | "messages";

export type CaptureTurn =
  | { kind: "text"; text: string }
  | { kind: "tool"; name: string; namespace?: string; arguments: Record<string, unknown> };

interface OfferedTool {
  name: string;
  namespace?: string;
  schema: unknown;
}

/** The parts of a request of any dialect the decision reads. */
interface Reading {
  lastUserText: string;
  /** The text of the tool results that end the conversation, when it ends with any. */
  toolResult?: string;
  tools: OfferedTool[];
  forced?: string;
  schema?: unknown;
}

export function decideTurn(dialect: Dialect, body: any): CaptureTurn {
  const reading = READERS[dialect](body ?? {});
  if (reading.toolResult !== undefined) return { kind: "text", text: `The tool said: ${reading.toolResult.trim().slice(0, 200)}` };
  const forced =
    reading.forced ?? (reading.tools.length === 1 && isRequired(dialect, body?.tool_choice) ? reading.tools[0]!.name : undefined);
  const forcedTool = reading.tools.find((tool) => tool.name === forced);
  if (forcedTool) return callOf(forcedTool, undefined);
  if (reading.schema === JSON_OBJECT) return { kind: "text", text: jsonIn(reading.lastUserText) ?? "{}" };
  if (reading.schema !== undefined) return { kind: "text", text: JSON.stringify(exampleOf(reading.schema)) };
  const marker =
    /\[\[call:([\w.:-]+)\s*(\{[\s\S]*?\})?\]\]/.exec(reading.lastUserText) ??
    /^\/tool\s+(\S+)\s*(\{[\s\S]*\})?\s*$/.exec(reading.lastUserText.trim());
  const marked = marker && reading.tools.find((tool) => tool.name === marker[1]);
  if (marked) return callOf(marked, marker[2] ? JSON.parse(marker[2]) : undefined);
  return { kind: "text", text: `Captured: ${reading.lastUserText.replace(/\s+/g, " ").trim().slice(0, 60)}` };
}

/** JSON mode without a schema. */
const JSON_OBJECT = Symbol("json_object");

/** The JSON object a text is or carries (from its first `{` to its last `}`), as a model in JSON mode would repeat it. */
function jsonIn(text: string): string | undefined {
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  if (start < 0 || end <= start) return undefined;
  try {
    const value: unknown = JSON.parse(text.slice(start, end + 1));
    return value && typeof value === "object" ? text.slice(start, end + 1) : undefined;
  } catch {
    return undefined;
  }
}

function callOf(tool: OfferedTool, args: Record<string, unknown> | undefined): CaptureTurn {
  return {
    kind: "tool",
    name: tool.name,
    namespace: tool.namespace,
    arguments: args ?? (exampleOf(tool.schema) as Record<string, unknown>),
  };
}

function isRequired(dialect: Dialect, choice: any): boolean {
  return dialect === "messages" ? choice?.type === "any" : choice === "required";
}

const textOf = (content: any): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content
          .map((part: any) => (typeof part?.text === "string" ? part.text : typeof part?.content === "string" ? part.content : ""))
          .join("\n")
      : "";

const READERS: Record<Dialect, (body: any) => Reading> = {
  chat(body) {
    const messages: any[] = Array.isArray(body.messages) ? body.messages : [];
    const trailing = trailingWhile(messages, (message) => message.role === "tool");
    const format = body.response_format;
    return {
      lastUserText: textOf(messages.findLast((message) => message.role === "user")?.content),
      toolResult: trailing.length ? trailing.map((message) => textOf(message.content)).join("\n") : undefined,
      tools: (body.tools ?? [])
        .filter((tool: any) => tool.type === "function")
        .map((tool: any) => ({ name: tool.function.name, schema: tool.function.parameters })),
      forced: body.tool_choice?.function?.name,
      schema: format?.type === "json_schema" ? format.json_schema?.schema : format?.type === "json_object" ? JSON_OBJECT : undefined,
    };
  },
  responses(body) {
    const items: any[] =
      typeof body.input === "string" ? [{ role: "user", content: body.input }] : Array.isArray(body.input) ? body.input : [];
    const trailing = trailingWhile(items, (item) => typeof item.type === "string" && item.type.endsWith("_call_output"));
    const format = body.text?.format;
    const tools: OfferedTool[] = [];
    for (const tool of body.tools ?? []) {
      if (tool.type === "function") tools.push({ name: tool.name, schema: tool.parameters });
      if (tool.type === "namespace")
        for (const inner of tool.tools ?? [])
          if (inner.type === "function") tools.push({ name: inner.name, namespace: tool.name, schema: inner.parameters });
    }
    return {
      lastUserText: textOf(items.findLast((item) => item.role === "user")?.content),
      toolResult: trailing.length
        ? trailing.map((item) => (typeof item.output === "string" ? item.output : textOf(item.output))).join("\n")
        : undefined,
      tools,
      forced: body.tool_choice?.type === "function" ? body.tool_choice.name : undefined,
      schema: format?.type === "json_schema" ? format.schema : format?.type === "json_object" ? JSON_OBJECT : undefined,
    };
  },
  messages(body) {
    const messages: any[] = Array.isArray(body.messages) ? body.messages : [];
    const last = messages.at(-1);
    const results = Array.isArray(last?.content) ? last.content.filter((block: any) => block.type === "tool_result") : [];
    const format = body.output_config?.format;
    return {
      lastUserText: textOf(messages.findLast((message) => message.role === "user")?.content),
      toolResult: last?.role === "user" && results.length ? results.map((block: any) => textOf(block.content)).join("\n") : undefined,
      tools: (body.tools ?? [])
        .filter((tool: any) => tool.input_schema)
        .map((tool: any) => ({ name: tool.name, schema: tool.input_schema })),
      forced: body.tool_choice?.type === "tool" ? body.tool_choice.name : undefined,
      schema: format?.type === "json_schema" ? format.schema : undefined,
    };
  },
};

function trailingWhile<T>(list: T[], test: (item: T) => boolean): T[] {
  let start = list.length;
  while (start > 0 && test(list[start - 1]!)) start--;
  return list.slice(start);
}

/** A value that satisfies a JSON Schema (the subset structured output uses: objects, arrays, scalars, enums, unions, `$ref`). */
export function exampleOf(schema: any, root: any = schema, depth = 0): unknown {
  if (!schema || typeof schema !== "object" || depth > 12) return null;
  if (typeof schema.$ref === "string") {
    const target = schema.$ref
      .replace(/^#\/?/, "")
      .split("/")
      .filter(Boolean)
      .reduce((node: any, key: string) => node?.[key.replace(/~1/g, "/").replace(/~0/g, "~")], root);
    return exampleOf(target, root, depth + 1);
  }
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if ("default" in schema) return schema.default;
  const union = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(union)) return exampleOf(union.find((option: any) => option?.type !== "null") ?? union[0], root, depth + 1);
  if (Array.isArray(schema.allOf)) return Object.assign({}, ...schema.allOf.map((part: any) => exampleOf(part, root, depth + 1)));
  const type = Array.isArray(schema.type) ? (schema.type.find((name: string) => name !== "null") ?? "null") : schema.type;
  switch (type ?? (schema.properties ? "object" : schema.items ? "array" : undefined)) {
    case "object":
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([key, value]) => [key, exampleOf(value, root, depth + 1)]));
    case "array":
      return Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () => exampleOf(schema.items ?? {}, root, depth + 1));
    case "string":
      return schema.format === "date-time"
        ? "2026-01-01T00:00:00Z"
        : schema.format === "date"
          ? "2026-01-01"
          : schema.format === "email"
            ? "ada@example.com"
            : "example";
    case "integer":
    case "number":
      return Math.max(schema.minimum ?? 1, schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 1);
    case "boolean":
      return true;
    case "null":
      return null;
    default:
      return {};
  }
}
