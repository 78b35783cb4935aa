import { ServiceError, type ErrorCode } from "../../errors.js";
import { redactSecrets, redactText } from "../../outbound/secrets.js";

/**
 * What every upstream adapter throws (docs/providers.md "Errors and retries"): a ServiceError
 * rendered as before (a relayed error keeps the upstream's status and body, docs/interface.md 7.2), plus
 * what a caller needs to decide on another attempt without reading bodies:
 * - `upstreamStatus`: the status the provider answered with (absent when it never answered);
 * - `retryAfterMs`: the wait the provider asked for (`Retry-After`, `retry-after-ms`, or
 *   Gemini's `RetryInfo`), unbounded: the caller bounds it;
 * - `retryable`: 408, 429, 5xx (529 "overloaded" included), connection errors and timeouts.
 *   A 4xx that is the request's fault (400, 401, 403, 404, 413, 422…) is not.
 * The upstream's headers are never copied onto the response (docs/interface.md 7.2: a relayed 429 carries
 * no `Retry-After` on the Platform API).
 */
export interface ProviderErrorOptions {
  status?: number;
  upstreamBody?: unknown;
  upstreamStatus?: number;
  retryAfterMs?: number;
  retryable: boolean;
  /** For the operator's log line only (the unset variable behind a missing key). */
  operatorNote?: Record<string, unknown>;
  cause?: unknown;
}

export class ProviderError extends ServiceError {
  readonly upstreamStatus?: number;
  readonly retryAfterMs?: number;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options: ProviderErrorOptions) {
    // What the upstream said reaches the client and the log: a key it echoed is masked first.
    super(code, redactText(message), {
      status: options.status,
      upstreamBody: redactSecrets(options.upstreamBody),
      cause: options.cause,
      ...(options.operatorNote ? { operatorNote: options.operatorNote } : {}),
    });
    this.name = "ProviderError";
    this.upstreamStatus = options.upstreamStatus;
    this.retryAfterMs = options.retryAfterMs;
    this.retryable = options.retryable;
  }
}

export function isProviderError(error: unknown): error is ProviderError {
  return error instanceof ProviderError;
}

/** Statuses worth another attempt: timeouts, rate limits and server-side failures. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || (status >= 500 && status <= 599);
}

/**
 * The wait an answer asks for, in ms: `retry-after-ms` (OpenAI, Azure), else `Retry-After`
 * as seconds or an HTTP date. Undefined when absent or unreadable.
 */
export function retryAfterOf(headers: Record<string, string | string[] | undefined>, now = Date.now()): number | undefined {
  const header = (name: string) => {
    const value = headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const ms = header("retry-after-ms");
  if (ms !== undefined && /^\s*\d+(\.\d+)?\s*$/.test(ms)) return Math.round(Number(ms));
  const after = header("retry-after")?.trim();
  if (!after) return undefined;
  if (/^\d+(\.\d+)?$/.test(after)) return Math.round(Number(after) * 1000);
  const date = Date.parse(after);
  return Number.isFinite(date) ? Math.max(0, date - now) : undefined;
}

/** Gemini's `RetryInfo` detail (`"retryDelay": "30s"`) in an error body, in ms. */
export function retryDelayOf(body: unknown): number | undefined {
  const details = (body as { error?: { details?: unknown } })?.error?.details;
  if (!Array.isArray(details)) return undefined;
  for (const detail of details) {
    const delay = (detail as { retryDelay?: unknown })?.retryDelay;
    const match = typeof delay === "string" ? /^(\d+(?:\.\d+)?)s$/.exec(delay) : null;
    if (match) return Math.round(Number(match[1]) * 1000);
  }
  return undefined;
}

/** The human message of a provider's error body, whichever of the usual shapes it has. */
export function messageOf(body: unknown, status: number): string {
  const object = body as { error?: unknown; message?: unknown; Message?: unknown; detail?: unknown };
  const error = object?.error as { message?: unknown } | string | undefined;
  const candidates = [typeof error === "string" ? error : error?.message, object?.message, object?.Message, object?.detail];
  const found = candidates.find((candidate) => typeof candidate === "string" && candidate !== "");
  return typeof found === "string" ? found : `HTTP ${status}`;
}

/**
 * What any error a provider call threw says about another attempt: a `ProviderError`'s own
 * fields; for any other error (a mid-stream cut, a bug), not retryable.
 */
export function retryInfo(error: unknown): { retryable: boolean; retryAfterMs?: number; upstreamStatus?: number } {
  if (!isProviderError(error)) return { retryable: false };
  return {
    retryable: error.retryable,
    ...(error.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs }),
    ...(error.upstreamStatus === undefined ? {} : { upstreamStatus: error.upstreamStatus }),
  };
}
