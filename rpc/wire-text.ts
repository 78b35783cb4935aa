/**
 * The text an object already has on the wire, kept beside it so a relay can send it on
 * without serialising it again (docs/performance.md "Streams"): a model provider's stream
 * frame parsed for metering, then relayed with at most its `model` rewritten. An object
 * without one is serialised as JSON; an object built or changed since gets none.
 */
const WIRE_TEXT = Symbol("wireText");

export function wireTextOf(item: unknown): string | undefined {
  return typeof item === "object" && item !== null ? (item as { [WIRE_TEXT]?: string })[WIRE_TEXT] : undefined;
}

/**
 * Records `text` as the exact JSON of `item` (the caller vouches for it) and returns the item.
 * Kept on the item under a symbol that is not enumerable, so neither JSON nor a copy of the
 * item (`{...item}`) carries it (a WeakMap measured several µs per frame, most of it in GC).
 */
export function withWireText<T extends object>(item: T, text: string): T {
  Object.defineProperty(item, WIRE_TEXT, { value: text });
  return item;
}

/**
 * The JSON text `text` of an object with its top-level string field `name` changed from
 * `from` to `to`, done on the text; undefined when that cannot be done safely. The field's
 * quoted name must occur exactly once in the text (so it is the top-level key the caller
 * parsed, not a nested field or a string value of that name) and be followed directly by
 * `:` and `from` as `JSON.stringify` writes it.
 */
export function replaceStringField(text: string, name: string, from: string, to: string): string | undefined {
  if (from === to) return text;
  const key = `"${name}"`;
  const at = text.indexOf(key);
  if (at < 0 || text.indexOf(key, at + key.length) >= 0) return undefined;
  const field = `${key}:${JSON.stringify(from)}`;
  if (!text.startsWith(field, at)) return undefined;
  return `${text.slice(0, at)}${key}:${JSON.stringify(to)}${text.slice(at + field.length)}`;
}
