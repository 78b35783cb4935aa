/**
 * The secrets the service holds that an upstream could echo back (docs/security.md "Upstream
 * errors"): the provider keys it sends (added when an adapter reads one) and the service's own
 * configured secrets (added at start). Anything an upstream answers that reaches a client or a
 * log line — a relayed error body, its message — has every one of them replaced first: some
 * providers repeat an invalid key in their error.
 */
const secrets = new Set<string>();
let pattern: RegExp | undefined;

/** Values shorter than this are not secrets worth a scan (and would mask ordinary words). */
const SHORTEST = 8;

export function addSecret(value: string | undefined): void {
  if (!value || value.length < SHORTEST || secrets.has(value)) return;
  secrets.add(value);
  pattern = undefined;
}

export const REDACTED = "[redacted]";

function escapeForPattern(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A text with every known secret replaced. */
export function redactText(text: string): string {
  if (!secrets.size) return text;
  pattern ??= new RegExp(
    [...secrets]
      .sort((a, b) => b.length - a.length)
      .map(escapeForPattern)
      .join("|"),
    "g",
  );
  return text.replace(pattern, REDACTED);
}

/** A JSON value with every known secret replaced in its strings (keys included), bounded in depth. */
export function redactSecrets<T>(value: T, depth = 0): T {
  if (!secrets.size) return value;
  if (typeof value === "string") return redactText(value) as T;
  if (!value || typeof value !== "object" || depth > 64) return value;
  if (Array.isArray(value)) return value.map((item) => redactSecrets(item, depth + 1)) as T;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) out[redactText(key)] = redactSecrets(item, depth + 1);
  return out as T;
}
