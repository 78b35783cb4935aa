import { SignJWT } from "jose";
import type { Config } from "../../config.js";
import type { Logger } from "../../log.js";
import type { Principal } from "../../auth.js";
import { ServiceError } from "../../errors.js";
import { isUpstreamTimeout, upstreamRequest, type UpstreamResponse } from "../../outbound/upstream.js";
import { toOrchestratorError, unreachable, timedOut } from "./errors.js";

/** Who the orchestrator is told is calling; the caller's own token is never forwarded. */
export interface Caller {
  principal: Principal;
  requestId: string;
  /** The caller's W3C traceparent, passed on unchanged. */
  traceparent?: string;
}

export interface OrchestratorRequest {
  method: "GET" | "POST";
  /** Path below ORCH_BASE_URL, already encoded. */
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: Record<string, unknown>;
  caller: Caller;
  /** The caller's signal: when it aborts, the upstream request stops too. */
  signal?: AbortSignal;
}

export interface OrchestratorClientOptions {
  /** Pause before a retry of an idempotent GET, per attempt (default 200 ms × attempt). */
  retryDelayMs?: (attempt: number) => number;
}

/** Audience and issuer of the service token the orchestrator verifies with SERVICE_JWT_SECRET. */
export const SERVICE_TOKEN_AUDIENCE = "orchestrator";
export const SERVICE_TOKEN_ISSUER = "gateway";
const SERVICE_TOKEN_TTL_SECONDS = 60;

/**
 * HTTP client of the orchestrator (docs/interface.md 4.4, orchestrator-proxy mode; docs/interface.md 8 ORCH_BASE_URL).
 *
 * - every request has GATEWAY_TIMEOUT_SECONDS to answer (a stream: to send its headers);
 * - GETs are retried GATEWAY_MAX_RETRIES times on a network error, a timeout or a 5xx/429;
 *   POSTs never are (pause, commit and pr are not idempotent);
 * - the caller's identity goes in `X-User-Id`, `X-Workspace-Id`, `X-Credential-Kind` and
 *   `X-Request-Id`, vouched for by `Authorization: Bearer <service token>` (docs/orchestrator.md).
 */
export class OrchestratorClient {
  readonly baseUrl: string;
  readonly #config: Config;
  readonly #log: Logger;
  readonly #retryDelayMs: (attempt: number) => number;
  readonly #key: Uint8Array | undefined;

  constructor(config: Config, log: Logger, options: OrchestratorClientOptions = {}) {
    if (!config.ORCH_BASE_URL) throw new Error("ORCH_BASE_URL is not set");
    this.baseUrl = config.ORCH_BASE_URL.replace(/\/+$/, "");
    this.#config = config;
    this.#log = log;
    this.#retryDelayMs = options.retryDelayMs ?? ((attempt) => 200 * attempt);
    this.#key = config.SERVICE_JWT_SECRET ? new TextEncoder().encode(config.SERVICE_JWT_SECRET) : undefined;
  }

  /** A JSON answer (undefined for an empty one). Errors are ServiceErrors (errors.ts). */
  async json(request: OrchestratorRequest): Promise<unknown> {
    const attempts = request.method === "GET" ? this.#config.GATEWAY_MAX_RETRIES + 1 : 1;
    for (let attempt = 1; ; attempt += 1) {
      try {
        const response = await this.#send(request, "json");
        const text = await readText(response.body, this.#timeoutMs);
        return text === "" ? undefined : parseBody(text);
      } catch (error) {
        const retryable = attempt < attempts && isRetryable(error) && !request.signal?.aborted;
        this.#log.info({
          requestId: request.caller.requestId,
          event: "orchestrator.error",
          method: request.method,
          path: request.path,
          attempt,
          retrying: retryable,
          error: describeFailure(error),
        });
        if (!retryable) throw this.#toServiceError(error);
        await pause(this.#retryDelayMs(attempt), request.signal);
      }
    }
  }

  /**
   * An event stream: resolves with the body once the orchestrator answered 2xx (errors as for
   * `json`); the body then streams for as long as the orchestrator sends it, with no limit on
   * the gaps between events. Not retried.
   */
  async stream(request: OrchestratorRequest): Promise<AsyncIterable<Uint8Array>> {
    try {
      const response = await this.#send(request, "stream");
      return response.body;
    } catch (error) {
      this.#log.info({
        requestId: request.caller.requestId,
        event: "orchestrator.error",
        method: request.method,
        path: request.path,
        error: describeFailure(error),
      });
      throw this.#toServiceError(error);
    }
  }

  get #timeoutMs() {
    return this.#config.GATEWAY_TIMEOUT_SECONDS * 1000;
  }

  /**
   * One attempt on the shared upstream pool (rpc/outbound/upstream.ts). The time limit covers
   * the answer's headers and, for JSON, each gap in its body; the caller's signal covers the
   * whole exchange and closes the connection when it aborts. A non-2xx answer is read and
   * thrown as an `HttpFailure`.
   */
  async #send(request: OrchestratorRequest, responseType: "json" | "stream"): Promise<UpstreamResponse> {
    const timeoutMs = this.#timeoutMs;
    const headers = await this.#headers(request.caller, responseType);
    let body: string | undefined;
    if (request.method === "POST") {
      body = JSON.stringify(request.body ?? {});
      headers["content-type"] = "application/json";
    }
    let response: UpstreamResponse;
    try {
      response = await upstreamRequest(this.baseUrl + request.path + queryString(request.query), {
        method: request.method,
        headers,
        body,
        signal: request.signal,
        timeoutMs,
        bodyTimeoutMs: responseType === "stream" ? 0 : timeoutMs,
      });
    } catch (error) {
      if (isUpstreamTimeout(error)) throw new TimeoutFailure(timeoutMs, error);
      throw error;
    }
    if (response.statusCode >= 200 && response.statusCode < 300) return response;
    const text = await readText(response.body, timeoutMs).catch(() => "");
    const retryAfter = response.headers["retry-after"];
    throw new HttpFailure(response.statusCode, parseBody(text), typeof retryAfter === "string" ? retryAfter : undefined);
  }

  async #headers(caller: Caller, responseType: "json" | "stream"): Promise<Record<string, string>> {
    const { principal } = caller;
    const headers: Record<string, string> = {
      accept: responseType === "stream" ? "text/event-stream" : "application/json",
      "x-request-id": caller.requestId,
      "x-user-id": principal.userId,
      "x-credential-kind": principal.kind,
    };
    if (principal.workspaceId) headers["x-workspace-id"] = principal.workspaceId;
    if (caller.traceparent) headers.traceparent = caller.traceparent;
    const token = await this.serviceToken(principal);
    if (token) headers.authorization = `Bearer ${token}`;
    return headers;
  }

  /**
   * The bearer the orchestrator checks: an HS256 JWT signed with SERVICE_JWT_SECRET (subject
   * the user, 60 s), else PLATFORM_SERVICE_KEY as is, else none (a private network only).
   */
  async serviceToken(principal: Principal): Promise<string | undefined> {
    if (this.#key) {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ kind: principal.kind, ...(principal.workspaceId ? { workspaceId: principal.workspaceId } : {}) })
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setIssuer(SERVICE_TOKEN_ISSUER)
        .setAudience(SERVICE_TOKEN_AUDIENCE)
        .setSubject(principal.userId)
        .setIssuedAt(now)
        .setExpirationTime(now + SERVICE_TOKEN_TTL_SECONDS)
        .sign(this.#key);
    }
    return this.#config.PLATFORM_SERVICE_KEY;
  }

  #toServiceError(error: unknown): ServiceError {
    if (error instanceof ServiceError) return error;
    if (error instanceof TimeoutFailure) return timedOut(this.#config.GATEWAY_TIMEOUT_SECONDS);
    if (error instanceof HttpFailure) return toOrchestratorError(error.status, error.data, error.retryAfter);
    return unreachable(error);
  }
}

class TimeoutFailure extends Error {
  constructor(
    readonly ms: number,
    cause?: unknown,
  ) {
    super(`no answer within ${ms} ms`, { cause });
    this.name = "TimeoutFailure";
  }
}

/** The orchestrator answered, with an error status; `data` is its body (JSON when it parses). */
class HttpFailure extends Error {
  constructor(
    readonly status: number,
    readonly data: unknown,
    readonly retryAfter?: string,
  ) {
    super(`HTTP ${status}`);
    this.name = "HttpFailure";
  }
}

/** Network errors, timeouts, 5xx and 429 may pass; a 4xx answer will not change. */
function isRetryable(error: unknown): boolean {
  if (error instanceof TimeoutFailure) return true;
  if (error instanceof HttpFailure) return error.status >= 500 || error.status === 429;
  return !(error instanceof ServiceError);
}

/** The whole body as text; a silent body past the time limit is a timeout. */
async function readText(body: UpstreamResponse["body"], timeoutMs: number): Promise<string> {
  try {
    return await body.text();
  } catch (error) {
    if (isUpstreamTimeout(error)) throw new TimeoutFailure(timeoutMs, error);
    throw error;
  }
}

function parseBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function queryString(query: OrchestratorRequest["query"]): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.append(key, String(value));
  const text = params.toString();
  return text ? `?${text}` : "";
}

function describeFailure(error: unknown): string {
  if (error instanceof HttpFailure) return error.message;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

const clients = new WeakMap<object, OrchestratorClient>();

/** The one client of a running service (created on first use, one per `Services`). */
export function orchestratorOf(deps: { config: Config; log: Logger }): OrchestratorClient {
  let client = clients.get(deps);
  if (!client) {
    client = new OrchestratorClient(deps.config, deps.log);
    clients.set(deps, client);
  }
  return client;
}
