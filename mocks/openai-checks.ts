import { HttpResponse } from "msw";

/**
 * Request checks OpenAI's chat completions and Responses APIs share, worded as the APIs word
 * their 400s (`{error: {message, type, param, code}}`), for mocks/openai-chat-upstream.ts and
 * mocks/openai-responses-upstream.ts: JSON mode needs the word "json" in the messages, and a
 * strict JSON schema must be of the subset Structured Outputs supports.
 */

export function openAiError(message: string, param: string | null, code: string | null, status = 400): HttpResponse<any> {
  return HttpResponse.json({ error: { message, type: "invalid_request_error", param, code } }, { status });
}

/** Whether texts mention JSON, as JSON mode requires of the messages (case-insensitively). */
export function mentionsJson(texts: readonly string[]): boolean {
  return texts.some((text) => /json/i.test(text));
}

/** The texts of a message's content: a string, or the `text` of its parts. */
export function textsOf(content: unknown): string[] {
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) return [];
  return content.map((part) => (typeof part?.text === "string" ? part.text : "")).filter(Boolean);
}

/**
 * The first reason a strict schema is refused, as OpenAI words it after "Invalid schema for
 * response_format '<name>': ", or undefined when Structured Outputs takes it: the root is an
 * object; every object sets `additionalProperties: false` and lists every property in
 * `required`; every schema has a `type` (or is a `$ref`, `anyOf`, `enum` or `const`).
 */
export function strictSchemaProblem(schema: unknown): string | undefined {
  if (!isObject(schema)) return "schema must be a JSON Schema of 'type: \"object\"'.";
  if (schema.type !== "object" && schema.$ref === undefined)
    return `schema must be a JSON Schema of 'type: "object"', got 'type: "${String(schema.type)}"'.`;
  return walk(schema, []);
}

function walk(node: unknown, path: string[]): string | undefined {
  if (!isObject(node)) return undefined;
  const context = `In context=${tuple(path)}`;
  const typed = ["type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const"].some((key) => key in node);
  if (!typed) return `${context}, schema must have a 'type' key.`;
  const types = Array.isArray(node.type) ? node.type : [node.type];
  if (types.includes("object")) {
    if (node.additionalProperties !== false) return `${context}, 'additionalProperties' is required to be supplied and to be false.`;
    const properties = isObject(node.properties) ? Object.keys(node.properties) : [];
    const required = Array.isArray(node.required) ? node.required : [];
    const missing = properties.find((name) => !required.includes(name));
    if (missing !== undefined)
      return `${context}, 'required' is required to be supplied and to be an array including every key in properties. Missing '${missing}'.`;
  }
  const children: [string[], unknown][] = [];
  for (const key of ["properties", "$defs", "definitions"])
    if (isObject(node[key])) for (const [name, sub] of Object.entries(node[key])) children.push([[key, name], sub]);
  if (isObject(node.items)) children.push([["items"], node.items]);
  for (const key of ["anyOf", "oneOf", "allOf"])
    if (Array.isArray(node[key])) for (const [index, sub] of (node[key] as unknown[]).entries()) children.push([[key, String(index)], sub]);
  for (const [steps, sub] of children) {
    const problem = walk(sub, [...path, ...steps]);
    if (problem) return problem;
  }
  return undefined;
}

/** A path as the Python tuple OpenAI's messages print: `()`, `('items',)`, `('properties', 'a')`. */
function tuple(path: readonly string[]): string {
  const items = path.map((step) => `'${step}'`);
  return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
