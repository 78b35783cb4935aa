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
  if (WIRE_TEXT in item) (item as { [WIRE_TEXT]?: string })[WIRE_TEXT] = text;
  else Object.defineProperty(item, WIRE_TEXT, { value: text, writable: true });
  return item;
}

/** The item, changed in a way its text does not show: serialised as JSON from now on. */
export function withoutWireText<T extends object>(item: T): T {
  if (WIRE_TEXT in item) (item as { [WIRE_TEXT]?: string })[WIRE_TEXT] = undefined;
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
  return fieldReplacer(name, to)(text, from);
}

/**
 * `replaceStringField` for one field and new value, on many texts (a stream's frames): the
 * quoted forms are made once, and again only when `from` changes.
 */
export function fieldReplacer(name: string, to: string): (text: string, from: string) => string | undefined {
  const key = `"${name}"`;
  const next = `${key}:${JSON.stringify(to)}`;
  let last: string | undefined;
  let field = "";
  return (text, from) => {
    if (from === to) return text;
    const at = text.indexOf(key);
    if (at < 0 || text.indexOf(key, at + key.length) >= 0) return undefined;
    if (from !== last) {
      last = from;
      field = `${key}:${JSON.stringify(from)}`;
    }
    if (!text.startsWith(field, at)) return undefined;
    return text.slice(0, at) + next + text.slice(at + field.length);
  };
}
