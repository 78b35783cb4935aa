/**
 * A JSON value conforming to a JSON Schema, for the provider mocks: what a model held to a
 * structured-output schema (or forced to call a tool) answers. Written apart from the gateway's
 * own generator on purpose: a mock must not share the code it tests.
 *
 * Objects get every declared property (an object that declares none, and allows others, gets
 * `text`, as the gateway's echo model answers JSON mode); arrays one item (or `minItems`); strings `text` (or `enum[0]`, `const`, a value of a
 * well-known `format`, padded or cut to `minLength`/`maxLength`); numbers their minimum or 0
 * (within `maximum`, a multiple of `multipleOf`); booleans false. `$ref`s into the same document
 * (`#`, `#/$defs/…`, `#/definitions/…`), `anyOf`/`oneOf` (the first branch that is not null),
 * `allOf`, type lists and OpenAPI's `nullable` and upper-case types (Gemini's `responseSchema`)
 * are followed. `pattern` is not honoured. Recursion ends at a fixed depth with empty containers.
 */

type Schema = Record<string, unknown>;

const MAX_DEPTH = 12;

const FORMATS: Record<string, string> = {
  "date-time": "1970-01-01T00:00:00.000Z",
  date: "1970-01-01",
  time: "00:00:00",
  email: "echo@example.com",
  uri: "https://example.com/",
  url: "https://example.com/",
  uuid: "00000000-0000-4000-8000-000000000000",
  ipv4: "127.0.0.1",
  ipv6: "::1",
  hostname: "example.com",
};

export function schemaExample(schema: unknown, text: string): unknown {
  const root = schema;

  /** The schema a `$ref` into this document points at (the node itself when it has none). */
  function resolve(node: unknown, seen = 0): unknown {
    if (!isObject(node) || typeof node.$ref !== "string" || seen > 32) return node;
    const ref = node.$ref;
    if (!ref.startsWith("#")) return {};
    let target: unknown = root;
    for (const token of ref.slice(1).split("/").filter(Boolean)) {
      const key = decodeURIComponent(token).replaceAll("~1", "/").replaceAll("~0", "~");
      target = isObject(target) || Array.isArray(target) ? (target as Record<string, unknown>)[key] : undefined;
    }
    // Keywords beside the $ref (2019-09 and later) apply too.
    const { $ref: _ref, ...siblings } = node;
    const resolved = resolve(target ?? {}, seen + 1);
    return isObject(resolved) ? { ...resolved, ...siblings } : resolved;
  }

  function build(raw: unknown, depth: number): unknown {
    if (raw === true || raw === undefined) return text;
    if (raw === false || !isObject(raw)) return null;
    const node = resolve(raw);
    if (!isObject(node)) return build(node, depth);
    if ("const" in node) return node.const;
    if (Array.isArray(node.enum) && node.enum.length) return node.enum.find((value) => value !== null) ?? node.enum[0];
    for (const key of ["anyOf", "oneOf"] as const) {
      const branches = node[key];
      if (Array.isArray(branches) && branches.length) {
        const concrete = branches.find((branch) => !isNull(resolve(branch))) ?? branches[0];
        // Past the depth bound, a null branch ends a recursive structure.
        const chosen = depth > MAX_DEPTH ? (branches.find((branch) => isNull(resolve(branch))) ?? concrete) : concrete;
        const { [key]: _branches, ...rest } = node;
        return build(Object.keys(rest).length ? merge(rest, resolve(chosen)) : chosen, depth);
      }
    }
    if (Array.isArray(node.allOf) && node.allOf.length) {
      const { allOf, ...rest } = node;
      return build(
        allOf.reduce<Schema>((merged, part) => merge(merged, resolve(part)), rest),
        depth,
      );
    }
    switch (typeOf(node)) {
      case "object":
        return objectOf(node, depth);
      case "array":
        return arrayOf(node, depth);
      case "integer":
        return numberOf(node, true);
      case "number":
        return numberOf(node, false);
      case "boolean":
        return false;
      case "null":
        return null;
      default:
        return stringOf(node);
    }
  }

  function objectOf(node: Schema, depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const properties = isObject(node.properties) ? node.properties : undefined;
    if (depth > MAX_DEPTH) {
      // Only what is required, so a recursive schema ends.
      for (const name of Array.isArray(node.required) ? node.required : [])
        if (typeof name === "string") out[name] = build(properties?.[name], depth + 1);
      return out;
    }
    if (properties) {
      for (const [name, sub] of Object.entries(properties)) out[name] = build(sub, depth + 1);
      return out;
    }
    if (node.additionalProperties === false) return out;
    // An open object (JSON mode, a map): one entry carrying the text, as the echo model answers JSON mode.
    out.text = isObject(node.additionalProperties) ? build(node.additionalProperties, depth + 1) : text;
    return out;
  }

  function arrayOf(node: Schema, depth: number): unknown[] {
    const prefix = Array.isArray(node.prefixItems) ? node.prefixItems : Array.isArray(node.items) ? node.items : [];
    const min = typeof node.minItems === "number" ? node.minItems : 0;
    const max = typeof node.maxItems === "number" ? node.maxItems : Number.POSITIVE_INFINITY;
    const wanted = depth > MAX_DEPTH ? min : Math.max(min, prefix.length, 1);
    const count = Math.min(wanted, max, 64);
    const rest = Array.isArray(node.items) ? (node.additionalItems ?? {}) : (node.items ?? {});
    return Array.from({ length: count }, (_, index) => build(index < prefix.length ? prefix[index] : rest, depth + 1));
  }

  function stringOf(node: Schema): string {
    let value = typeof node.format === "string" && FORMATS[node.format] ? FORMATS[node.format]! : text;
    if (typeof node.minLength === "number" && value.length < node.minLength) value = value.padEnd(node.minLength, ".");
    if (typeof node.maxLength === "number" && value.length > node.maxLength) value = value.slice(0, node.maxLength);
    return value;
  }

  return build(schema, 0);
}

function numberOf(node: Schema, integer: boolean): number {
  const num = (value: unknown) => (typeof value === "number" ? value : undefined);
  const lower = num(node.minimum);
  const upper = num(node.maximum);
  // Draft 4 spells exclusive bounds as booleans beside minimum and maximum.
  const exclusiveLower = node.exclusiveMinimum === true ? lower : num(node.exclusiveMinimum);
  const exclusiveUpper = node.exclusiveMaximum === true ? upper : num(node.exclusiveMaximum);
  const multiple = num(node.multipleOf) && (node.multipleOf as number) > 0 ? (node.multipleOf as number) : integer ? 1 : undefined;
  const up = (value: number) => (multiple ? Math.ceil(value / multiple) * multiple : value);
  const down = (value: number) => (multiple ? Math.floor(value / multiple) * multiple : value);
  const onStep = (value: number) => !multiple || Math.abs(value / multiple - Math.round(value / multiple)) < 1e-9;
  const fits = (value: number) =>
    onStep(value) &&
    (lower === undefined || value >= lower) &&
    (upper === undefined || value <= upper) &&
    (exclusiveLower === undefined || value > exclusiveLower) &&
    (exclusiveUpper === undefined || value < exclusiveUpper);
  // The minimum first, then 0, then the top of the range, then its middle.
  const candidates: number[] = [];
  if (lower !== undefined) candidates.push(up(lower));
  if (exclusiveLower !== undefined)
    candidates.push(up(exclusiveLower) > exclusiveLower ? up(exclusiveLower) : exclusiveLower + (multiple ?? 1));
  candidates.push(0);
  if (upper !== undefined) candidates.push(down(upper));
  if (exclusiveUpper !== undefined)
    candidates.push(down(exclusiveUpper) < exclusiveUpper ? down(exclusiveUpper) : exclusiveUpper - (multiple ?? 1));
  const from = exclusiveLower ?? lower;
  const to = exclusiveUpper ?? upper;
  if (from !== undefined && to !== undefined) candidates.push(up((from + to) / 2), (from + to) / 2);
  return candidates.find(fits) ?? candidates[0] ?? 0;
}

/** The node's type: the first of a type list that is not null, read case-insensitively, or what its keywords imply. */
function typeOf(node: Schema): string {
  const types = (Array.isArray(node.type) ? node.type : [node.type]).filter((type): type is string => typeof type === "string");
  const concrete = types.map((type) => type.toLowerCase()).find((type) => type !== "null");
  if (concrete) return concrete;
  if (types.length) return "null";
  if (node.properties || node.additionalProperties !== undefined || node.required) return "object";
  if (node.items || node.prefixItems) return "array";
  if (node.minimum !== undefined || node.maximum !== undefined) return "number";
  return "string";
}

function isNull(node: unknown): boolean {
  if (!isObject(node)) return false;
  if (node.const === null) return true;
  const types = Array.isArray(node.type) ? node.type : [node.type];
  return types.length > 0 && types.every((type) => typeof type === "string" && type.toLowerCase() === "null");
}

/** Two schemas as one (for `allOf` and keywords beside a branch): properties and `required` joined, the first's other keywords kept. */
function merge(a: Schema, b: unknown): Schema {
  if (!isObject(b)) return a;
  const out: Schema = { ...b, ...a };
  if (isObject(a.properties) || isObject(b.properties))
    out.properties = { ...(isObject(b.properties) ? b.properties : {}), ...(isObject(a.properties) ? a.properties : {}) };
  if (Array.isArray(a.required) || Array.isArray(b.required))
    out.required = [...new Set([...(Array.isArray(b.required) ? b.required : []), ...(Array.isArray(a.required) ? a.required : [])])];
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The answer text of a structured-output request: with a schema, the example of it; without one
 * (JSON mode), the JSON object the message carries (as a model asked to answer in JSON would
 * repeat it), else an example object, as JSON.
 */
export function jsonAnswer(schema: unknown, text: string): string {
  if (schema === undefined) {
    const carried = jsonObjectIn(text);
    if (carried) return carried;
  }
  return JSON.stringify(schemaExample(schema ?? { type: "object" }, text));
}

/** The JSON object a text is, or carries from its first `{` to its last `}`. */
function jsonObjectIn(text: string): string | undefined {
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  if (start < 0 || end <= start) return undefined;
  try {
    const value: unknown = JSON.parse(text.slice(start, end + 1));
    return isObject(value) ? JSON.stringify(value) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The input a model forced to call a tool gives it: an example of the tool's schema; for a tool
 * whose schema is an open object (no properties, as JSON mode's tool is), the JSON object the
 * message carries, as a model following the prompt would.
 */
export function toolInput(schema: unknown, text: string): Record<string, unknown> {
  const open = isObject(schema) && !isObject(schema.properties);
  if (open) {
    const carried = jsonObjectIn(text);
    if (carried) return JSON.parse(carried) as Record<string, unknown>;
  }
  const input = schemaExample(schema ?? { type: "object" }, text);
  return isObject(input) ? input : {};
}
