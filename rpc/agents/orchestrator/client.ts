import { SignJWT } from "jose";
import { ofetch, FetchError } from "ofetch";
import type { Config } from "../../config.js";
import type { Logger } from "../../log.js";
import type { Principal } from "../../auth.js";
import { ServiceError } from "../../errors.js";
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
 * HTTP client of the orchestrator (spec 4.4, orchestrator-proxy mode; spec 8 ORCH_BASE_URL).
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
        return response._data === "" ? undefined : response._data;
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
   * `json`); the body then streams for as long as the orchestrator sends it. Not retried.
   */
  async stream(request: OrchestratorRequest): Promise<ReadableStream<Uint8Array>> {
    try {
      const response = await this.#send(request, "stream");
      const body = response._data as ReadableStream<Uint8Array> | undefined;
      if (!body) throw new ServiceError("BAD_GATEWAY", "The orchestrator answered the stream request with an empty body");
      return body;
    } catch (error) {
      if (error instanceof ServiceError) throw error;
      this.#log.info({ requestId: request.caller.requestId, event: "orchestrator.error", method: request.method, path: request.path, error: describeFailure(error) });
      throw this.#toServiceError(await readStreamedErrorBody(error));
    }
  }

  async #send(request: OrchestratorRequest, responseType: "json" | "stream") {
    const timeoutMs = this.#config.GATEWAY_TIMEOUT_SECONDS * 1000;
    // One controller per attempt: the timeout covers the answer (for a stream, its headers),
    // the caller's signal covers the whole exchange.
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new TimeoutFailure(timeoutMs)), timeoutMs);
    const onCallerAbort = () => controller.abort(request.signal?.reason);
    request.signal?.addEventListener("abort", onCallerAbort, { once: true });
    if (request.signal?.aborted) onCallerAbort();
    try {
      return await ofetch.raw(this.baseUrl + request.path, {
        method: request.method,
        query: request.query,
        body: request.method === "POST" ? (request.body ?? {}) : undefined,
        headers: await this.#headers(request.caller, responseType),
        responseType: responseType === "stream" ? "stream" : "json",
        retry: false,
        signal: controller.signal,
      });
    } catch (error) {
      if (controller.signal.reason instanceof TimeoutFailure) throw controller.signal.reason;
      throw error;
    } finally {
      clearTimeout(timer);
      if (responseType === "json") request.signal?.removeEventListener("abort", onCallerAbort);
    }
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
    if (error instanceof FetchError && error.response) {
      return toOrchestratorError(error.response.status, error.data, error.response.headers);
    }
    return unreachable(error);
  }
}

class TimeoutFailure extends Error {
  constructor(readonly ms: number) {
    super(`no answer within ${ms} ms`);
    this.name = "TimeoutFailure";
  }
}

/** Network errors, timeouts, 5xx and 429 may pass; a 4xx answer will not change. */
function isRetryable(error: unknown): boolean {
  if (error instanceof TimeoutFailure) return true;
  if (error instanceof FetchError) {
    const status = error.response?.status;
    return status === undefined || status >= 500 || status === 429;
  }
  return false;
}

/** For a streamed request ofetch leaves the error body as a stream: read it for the message. */
async function readStreamedErrorBody(error: unknown): Promise<unknown> {
  if (!(error instanceof FetchError) || !error.response || !(error.data instanceof ReadableStream)) return error;
  let text = "";
  try {
    text = await new Response(error.data).text();
  } catch {
    // keep the status alone
  }
  let data: unknown = text;
  try {
    data = JSON.parse(text);
  } catch {
    // plain text
  }
  return toOrchestratorError(error.response.status, data, error.response.headers);
}

function describeFailure(error: unknown): string {
  if (error instanceof FetchError) {
    const cause = (error.cause as { cause?: { code?: string }; code?: string } | undefined) ?? {};
    return error.response ? `HTTP ${error.response.status}` : `${cause.cause?.code ?? cause.code ?? error.message}`;
  }
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
export function orchestratorOf(services: { config: Config; log: Logger }): OrchestratorClient {
  let client = clients.get(services);
  if (!client) {
    client = new OrchestratorClient(services.config, services.log);
    clients.set(services, client);
  }
  return client;
}
