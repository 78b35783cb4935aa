import type { ChatDialect } from "./types.js";

/**
 * A provider's answer in the client's own dialect, carried beside its canonical form: an
 * upstream of the client's dialect answers a forwarded request (docs/dialects.md "Same dialect:
 * forwarded"), its answer is read into chat chunks for metering, limits and tracing, and the
 * dialect relays what the upstream sent instead of retelling the chunks.
 *
 * Kept on the canonical object under a symbol, so JSON never shows it and a copy (`{...chunk}`)
 * keeps it.
 */
const NATIVE = Symbol("native");

export interface NativeAnswer {
  dialect: ChatDialect;
  /** A whole answer (a `message`, a `response`). */
  body?: Record<string, unknown>;
  /** The stream events a chunk was read from, in order (some chunks carry events only). */
  events?: Record<string, unknown>[];
}

export function withNative<T extends object>(item: T, native: NativeAnswer): T {
  (item as { [NATIVE]?: NativeAnswer })[NATIVE] = native;
  return item;
}

/** The native answer an item carries in `dialect`, if it carries one. */
export function nativeOf(item: unknown, dialect: ChatDialect): NativeAnswer | undefined {
  const native = typeof item === "object" && item !== null ? (item as { [NATIVE]?: NativeAnswer })[NATIVE] : undefined;
  return native?.dialect === dialect ? native : undefined;
}
