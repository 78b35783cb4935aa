import { maskUrlPasswords } from "../storage/mask.js";
import { activeLogIds } from "./tracing.js";

export type LogLevel = "info" | "error" | "silent";
export type LogSink = (line: string) => void;

export interface Logger {
  info(fields: Record<string, unknown>): void;
  /** Something went wrong outside the service (an upstream cut its answer): written at `info`. */
  warn(fields: Record<string, unknown>): void;
  error(fields: Record<string, unknown>): void;
}

// Anything shaped like a secret is masked before a line is written, whatever put it there.
// One pattern, one pass over the line: `sk-…`/`sk_…` keys, prefixed tokens (`gwk_…`), JWTs.
const SECRET_PATTERN = /\bsk[-_][\w-]{20,}|\b[a-z][a-z0-9]*_[0-9A-Za-z]{40,}|\beyJ[\w-]+\.[\w-]+\.[\w-]+/g;

// What every match of SECRET_PATTERN contains, checked first: a line holding none of these
// (nearly every line) is not scanned by the pattern (docs/performance.md "Small things per request").
const LONG_AFTER_UNDERSCORE = /_[0-9A-Za-z]{40}/;

export function redact(text: string): string {
  // A URL's password (`redis://:secret@host`) too; checked cheaply first, like the pattern below.
  const masked = maskUrlPasswords(text);
  if (!masked.includes("sk-") && !masked.includes("sk_") && !masked.includes("eyJ") && !LONG_AFTER_UNDERSCORE.test(masked)) return masked;
  return masked.replace(SECRET_PATTERN, "[redacted]");
}

/**
 * One JSON object per line. While tracing, a line written inside a span carries its `trace_id`
 * and `span_id` (a line that names its own, like a request's, keeps them).
 */
export function createLogger(level: LogLevel, sink: LogSink = (line) => process.stdout.write(`${line}\n`)): Logger {
  const write = (lvl: "info" | "warn" | "error", fields: Record<string, unknown>) =>
    sink(redact(JSON.stringify({ time: new Date().toISOString(), level: lvl, ...activeLogIds(), ...fields })));
  return {
    info: (fields) => {
      if (level === "info") write("info", fields);
    },
    warn: (fields) => {
      if (level === "info") write("warn", fields);
    },
    error: (fields) => {
      if (level !== "silent") write("error", fields);
    },
  };
}
