import { storageOutage } from "../storage/outage.js";

/**
 * The one service error. Handlers throw it; every surface renders it in its own envelope
 * (docs/interface.md 7), and JSON-RPC maps it to an error object with the code in this table.
 */
export const ERROR_TABLE = {
  PARSE_ERROR: { status: 400, rpc: -32700 },
  INVALID_REQUEST: { status: 400, rpc: -32600 },
  VALIDATION_FAILED: { status: 400, rpc: -32602 },
  BAD_REQUEST: { status: 400, rpc: -32602 },
  UNAUTHORIZED: { status: 401, rpc: -32001 },
  INSUFFICIENT_CREDITS: { status: 402, rpc: -32002 },
  FORBIDDEN: { status: 403, rpc: -32003 },
  INSUFFICIENT_CAPABILITY: { status: 403, rpc: -32003 },
  MODEL_NOT_AVAILABLE: { status: 403, rpc: -32003 },
  NOT_FOUND: { status: 404, rpc: -32004 },
  METHOD_NOT_FOUND: { status: 404, rpc: -32601 },
  METHOD_NOT_ALLOWED: { status: 405, rpc: -32005 },
  CONFLICT: { status: 409, rpc: -32009 },
  PAYLOAD_TOO_LARGE: { status: 413, rpc: -32013 },
  RATE_LIMITED: { status: 429, rpc: -32029 },
  QUOTA_EXCEEDED: { status: 429, rpc: -32029 },
  INTERNAL: { status: 500, rpc: -32603 },
  BAD_GATEWAY: { status: 502, rpc: -32052 },
  UNAVAILABLE: { status: 503, rpc: -32053 },
  TIMEOUT: { status: 504, rpc: -32054 },
  /** An upstream error relayed verbatim (docs/interface.md 7.2): status and body come from the upstream. */
  UPSTREAM: { status: 502, rpc: -32050 },
} as const satisfies Record<string, { status: number; rpc: number }>;

export type ErrorCode = keyof typeof ERROR_TABLE;

export interface ServiceErrorOptions {
  /** Structured detail shown to the caller (validation issues, usable model ids, …). */
  details?: unknown;
  /** Headers the response carries (e.g. `Retry-After` on 429). */
  headers?: Record<string, string>;
  /** Overrides the OpenAI-style `type` on surfaces that render one. */
  type?: string;
  /** Overrides the table's HTTP status (used for relayed upstream errors). */
  status?: number;
  /** For UPSTREAM: the upstream's body, relayed as is. */
  upstreamBody?: unknown;
  /**
   * What only the operator is told, in the request's log line, never in the answer: the
   * environment variable behind a limit or a missing setting (docs/observability.md).
   */
  operatorNote?: Record<string, unknown>;
  cause?: unknown;
}

export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly rpcCode: number;
  readonly details?: unknown;
  readonly headers?: Record<string, string>;
  readonly type?: string;
  readonly upstreamBody?: unknown;
  readonly operatorNote?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: ServiceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ServiceError";
    this.code = code;
    this.status = options.status ?? ERROR_TABLE[code].status;
    this.rpcCode = ERROR_TABLE[code].rpc;
    this.details = options.details;
    this.headers = options.headers;
    this.type = options.type;
    this.upstreamBody = options.upstreamBody;
    this.operatorNote = options.operatorNote;
  }
}

export function isServiceError(error: unknown): error is ServiceError {
  return error instanceof ServiceError;
}

/**
 * Masks what was not thrown on purpose: the caller sees "Internal error" and the request id,
 * never a stack trace or a driver message. The original goes to the log. Storage that cannot
 * serve now (Redis unreachable or refusing writes, the fs journal refusing them) is 503
 * `UNAVAILABLE` instead, with Retry-After: the request may succeed once it is back
 * (docs/storage.md "When Redis is down or full").
 */
export function toServiceError(error: unknown): ServiceError {
  if (isServiceError(error)) return error;
  if (storageOutage(error) !== undefined) {
    return new ServiceError("UNAVAILABLE", "Storage is unavailable; try again shortly", { cause: error, headers: { "Retry-After": "1" } });
  }
  return new ServiceError("INTERNAL", "Internal error", { cause: error });
}

/** An unexpected error for the log (never for a response body): name, message and stack, bounded. */
export function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}\n${error.stack ?? ""}`.slice(0, 4000);
  return String(error);
}
