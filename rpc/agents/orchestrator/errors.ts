import { ServiceError } from "../../errors.js";

/**
 * The orchestrator's own message from an error body, whatever its framework: `{error: {message}}`,
 * `{error: "…"}`, `{message}`, `{detail: "…"}` or FastAPI's `{detail: [{msg, loc}]}`, or plain text.
 */
export function messageOf(body: unknown): string | undefined {
  if (typeof body === "string") return body.trim().slice(0, 500) || undefined;
  if (typeof body !== "object" || body === null) return undefined;
  const record = body as Record<string, unknown>;
  const error = record.error;
  if (typeof error === "object" && error !== null && typeof (error as Record<string, unknown>).message === "string") {
    return (error as { message: string }).message;
  }
  if (typeof error === "string") return error;
  if (typeof record.message === "string") return record.message;
  if (typeof record.detail === "string") return record.detail;
  if (Array.isArray(record.detail)) {
    const parts = record.detail
      .map((item) => {
        if (typeof item !== "object" || item === null) return String(item);
        const { msg, loc } = item as { msg?: unknown; loc?: unknown };
        const where = Array.isArray(loc) ? loc.filter((p) => p !== "body").join(".") : "";
        return where ? `${where}: ${String(msg)}` : String(msg);
      })
      .filter(Boolean);
    if (parts.length) return parts.join("; ");
  }
  return undefined;
}

/**
 * An orchestrator error answer as ours (docs/orchestrator.md "Errors"): the caller's mistakes
 * keep their meaning and the orchestrator's message; the orchestrator's own failures are 502.
 */
export function toOrchestratorError(status: number, body: unknown, retryAfter?: string): ServiceError {
  const message = messageOf(body);
  switch (true) {
    case status === 400 || status === 422:
      return new ServiceError("BAD_REQUEST", message ?? "The orchestrator rejected the request");
    case status === 401:
      // The gateway's service credential was refused: a deployment problem, not the caller's.
      return new ServiceError("BAD_GATEWAY", "The orchestrator refused the gateway's service credentials");
    case status === 403:
      return new ServiceError("FORBIDDEN", message ?? "The orchestrator does not allow this");
    case status === 404:
      return new ServiceError("NOT_FOUND", message ?? "Agent not found");
    case status === 409:
      return new ServiceError("CONFLICT", message ?? "The agent is not in a state that allows this");
    case status === 429: {
      return new ServiceError(
        "RATE_LIMITED",
        message ?? "The orchestrator is rate limiting requests",
        retryAfter ? { headers: { "Retry-After": retryAfter } } : {},
      );
    }
    case status >= 400 && status < 500:
      return new ServiceError("BAD_REQUEST", message ?? `The orchestrator rejected the request (HTTP ${status})`);
    default:
      return new ServiceError("BAD_GATEWAY", `The orchestrator failed (HTTP ${status})${message ? `: ${message}` : ""}`, {
        details: { upstream: "orchestrator", status },
      });
  }
}

/** No answer at all: connection refused, DNS, reset. The address stays in the log, not the body. */
export function unreachable(error: unknown): ServiceError {
  const code = networkCode(error);
  return new ServiceError("BAD_GATEWAY", `The orchestrator is unreachable${code ? ` (${code})` : ""}`, {
    details: { upstream: "orchestrator" },
    cause: error,
  });
}

export function timedOut(seconds: number): ServiceError {
  return new ServiceError("TIMEOUT", `The orchestrator did not answer within ${seconds} s`, { details: { upstream: "orchestrator" } });
}

function networkCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && /^E[A-Z_]+$/.test(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
