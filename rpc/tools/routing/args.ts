import { FUNCTION_NAMES } from "../expression.js";

/**
 * Best-effort arguments for a tool from the words of one clause, for plans made without a
 * model (docs/routing.md "Arguments"). Only what can be read reliably is filled:
 *
 * - a math expression (`expression`, `expr`, `formula`): the longest run of numbers,
 *   operators, parentheses and function names, after "plus/minus/times/divided by" are
 *   turned into operators;
 * - a URL (`url`, `uri`, `link`, `href`): the first http(s) URL;
 * - a timezone (`timezone`, `tz`, `time_zone`): an IANA name (Area/City) or UTC;
 * - a path (`path`, `file`, `filename`): a token with a slash or a file extension;
 * - a number property: a number right after the property's name ("top 3");
 * - an enum property: one of its values written in the clause;
 * - any other string property that is required: quoted text, else the text after a colon,
 *   else the whole clause.
 *
 * Required properties nothing could be read for are returned in `missing`.
 */
export interface ExtractedArgs {
  args: Record<string, unknown>;
  missing: string[];
}

type Property = { type?: unknown; enum?: unknown; description?: unknown };

const URL_RE = /https?:\/\/[^\s"'<>`]+/i;
const TIMEZONE_RE = /\b(?:[A-Z][a-z]+(?:_[A-Z][a-z]+)*\/[A-Z][A-Za-z_]+(?:\/[A-Z][A-Za-z_]+)?|UTC)\b/;
const PATH_RE = /(?:^|\s)((?:\.{0,2}\/)?[\w.-]+(?:\/[\w.-]+)+\/?|[\w-]+\.[a-z0-9]{1,5})(?=$|[\s,;:!?])/i;
const QUOTED_RE = /"([^"]*)"|“([^”]*)”|`([^`]*)`|(?:^|\s)'([^']*)'(?=$|[\s.,;:!?])/;

const WORD_OPERATORS: [RegExp, string][] = [
  [/\bplus\b/gi, "+"],
  [/\bminus\b/gi, "-"],
  [/\b(?:times|multiplied by)\b/gi, "*"],
  [/\bdivided by\b/gi, "/"],
  [/\bmod(?:ulo)?\b/gi, "%"],
  [/\bto the power of\b/gi, "^"],
  [/\bsquared\b/gi, "^2"],
  [/\bcubed\b/gi, "^3"],
];

const EXPRESSION_RUN = new RegExp(`(?:\\d+(?:\\.\\d+)?|\\b(?:pi|e|${FUNCTION_NAMES.join("|")})\\b|[-+*/%^()]|[ \\t])+`, "gi");

/** The longest arithmetic-looking run of the text, or undefined. */
export function extractExpression(text: string): string | undefined {
  let source = text;
  for (const [pattern, operator] of WORD_OPERATORS) source = source.replace(pattern, ` ${operator} `);
  let best: string | undefined;
  for (const match of source.matchAll(EXPRESSION_RUN)) {
    const run = match[0]
      .trim()
      .replace(/^[*/%^)]+|[-+*/%^(]+$/g, "")
      .trim()
      .replace(/\s+/g, " ");
    // A lone number is not an expression to evaluate ("step 2"): need an operator or a function.
    if (!/\d|\bpi\b/i.test(run) || !/[-+*/%^]|\w\s*\(/.test(run)) continue;
    if (!best || run.length > best.length) best = run;
  }
  return best;
}

function quoted(text: string): string | undefined {
  const match = QUOTED_RE.exec(text);
  return match ? (match[1] ?? match[2] ?? match[3] ?? match[4]) : undefined;
}

function afterColon(text: string): string | undefined {
  const index = text.indexOf(":");
  if (index < 0) return undefined;
  const rest = text.slice(index + 1).trim();
  // "https://…" has a colon too: not a label.
  return rest && !/^\/\//.test(rest) ? rest : undefined;
}

function stringFor(name: string, text: string, required: boolean): string | undefined {
  const key = name.toLowerCase();
  if (/^(?:expression|expr|formula|equation)$/.test(key)) return extractExpression(text);
  if (/^(?:url|uri|link|href|endpoint)$/.test(key) || key.endsWith("_url")) return URL_RE.exec(text)?.[0].replace(/[.,;:!?)]+$/, "");
  if (/^(?:timezone|time_zone|tz)$/.test(key)) return TIMEZONE_RE.exec(text)?.[0];
  if (/^(?:path|file|filename|file_path|filepath)$/.test(key)) return quoted(text) ?? PATH_RE.exec(text)?.[1];
  if (!required) return undefined;
  return quoted(text) ?? afterColon(text) ?? text.trim();
}

function numberFor(name: string, text: string, integer: boolean): number | undefined {
  const words = name.replace(/[_-]+/g, " ").trim();
  const pattern = new RegExp(`\\b${words.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*(?:=|:|of|is)?\\s*(-?\\d+(?:\\.\\d+)?)`, "i");
  const match = pattern.exec(text);
  if (!match) return undefined;
  const value = Number(match[1]);
  return integer && !Number.isInteger(value) ? undefined : value;
}

function enumFor(values: unknown[], text: string): unknown {
  const lower = text.toLowerCase();
  return values.find(
    (value) => typeof value === "string" && new RegExp(`\\b${value.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\b`).test(lower),
  );
}

/** Reads what `schema` asks for out of `text` (see the module comment for what is understood). */
export function extractArgs(schema: Record<string, unknown>, text: string): ExtractedArgs {
  const properties = (typeof schema.properties === "object" && schema.properties !== null ? schema.properties : {}) as Record<
    string,
    Property
  >;
  const required = new Set(
    Array.isArray(schema.required) ? (schema.required as unknown[]).filter((name): name is string => typeof name === "string") : [],
  );
  const args: Record<string, unknown> = {};
  for (const [name, property] of Object.entries(properties)) {
    const isRequired = required.has(name);
    let value: unknown;
    if (Array.isArray(property.enum)) value = enumFor(property.enum, text);
    else if (property.type === "string") value = stringFor(name, text, isRequired);
    else if (property.type === "integer" || property.type === "number") value = numberFor(name, text, property.type === "integer");
    if (value !== undefined) args[name] = value;
  }
  const missing = [...required].filter((name) => !(name in args));
  return { args, missing };
}
