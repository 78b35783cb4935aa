import { ServiceError } from "../errors.js";
import { retryAfterOf } from "./providers/provider-error.js";

/**
 * What the router needs to know about a failed provider call (docs/providers.md "What is
 * retried"): its status, whether another attempt may succeed, how long the upstream asked to
 * wait, and whether the prompt did not fit the model's context window. The one place that reads
 * a provider's error, so adapters that expose more (a `retryable` flag, a parsed `Retry-After`)
 * are read here.
 */
export interface UpstreamFailure {
  status: number | undefined;
  /** 429, 408, 5xx, 529, connection errors and timeouts; never a request's own fault. */
  retryable: boolean;
  /** The upstream's Retry-After, in milliseconds (uncapped). */
  retryAfterMs: number | undefined;
  /** The prompt is longer than the model takes: only a model with a larger window can answer. */
  contextWindow: boolean;
  /** Counts towards the deployment's cooldown (an upstream fault, not a setting of ours). */
  countsAgainstDeployment: boolean;
}

/** Statuses that are the request's fault: sent again they fail again (docs/providers.md). */
const REQUEST_FAULT = new Set([400, 401, 403, 404, 413, 422]);

const CONTEXT_CODES = new Set(["context_length_exceeded", "string_above_max_length"]);
const CONTEXT_MESSAGE =
  /context (length|window)|maximum context|prompt is too long|too many (input )?tokens|input is too long|exceeds the model'?s? (maximum|context)/i;

export function classifyFailure(error: unknown): UpstreamFailure {
  const adapter = error as { retryable?: unknown; retryAfterMs?: unknown; status?: unknown; headers?: Record<string, string> };
  const status = typeof adapter.status === "number" ? adapter.status : undefined;
  const retryAfterMs =
    typeof adapter.retryAfterMs === "number" ? adapter.retryAfterMs : parseRetryAfter(headerOf(adapter.headers, "retry-after"));
  if (!(error instanceof ServiceError)) {
    // Not a provider's answer: a connection that failed below the adapter.
    return { status, retryable: true, retryAfterMs, contextWindow: false, countsAgainstDeployment: true };
  }
  const contextWindow = error.code === "UPSTREAM" && status !== undefined && status >= 400 && status < 500 && isContextError(error);
  let retryable: boolean;
  if (typeof adapter.retryable === "boolean") retryable = adapter.retryable;
  else if (error.code === "TIMEOUT" || error.code === "BAD_GATEWAY") retryable = true;
  // Not configured (an unset apiKeyEnv): another deployment may be.
  else if (error.code === "UNAVAILABLE") retryable = true;
  else if (error.code !== "UPSTREAM" || status === undefined) retryable = false;
  else retryable = status === 408 || status === 429 || status >= 500;
  if (status !== undefined && REQUEST_FAULT.has(status) && error.code === "UPSTREAM") retryable = false;
  return { status, retryable, retryAfterMs, contextWindow, countsAgainstDeployment: retryable && error.code !== "UNAVAILABLE" };
}

function isContextError(error: ServiceError): boolean {
  const body = error.upstreamBody as { error?: { code?: unknown; type?: unknown; message?: unknown } } | undefined;
  const code = body?.error?.code ?? body?.error?.type;
  if (typeof code === "string" && CONTEXT_CODES.has(code)) return true;
  const message = typeof body?.error?.message === "string" ? body.error.message : error.message;
  return CONTEXT_MESSAGE.test(message);
}

function headerOf(headers: Record<string, string> | undefined, name: string): string | undefined {
  if (!headers) return undefined;
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === name) return value;
  return undefined;
}

/** RFC 9110 10.2.3: delay-seconds or an HTTP date (the adapters' one parser, `retryAfterOf`). */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  return value === undefined ? undefined : retryAfterOf({ "retry-after": value }, now);
}
