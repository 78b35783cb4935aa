import { randomUUID } from "node:crypto";
import { getRequestIP, type H3Event } from "h3";
import { FastResponse } from "srvx";
import type { Surface } from "../define.js";
import { toServiceError } from "../errors.js";
import { describe } from "../dispatcher.js";
import type { Logger } from "../log.js";
import { errorBody } from "./surfaces.js";

export interface RequestScope {
  requestId: string;
  /** Headers for the response, error or not. */
  responseHeaders: Headers;
  /** Aborted when the client disconnects. */
  abort: AbortController;
  ip: string;
  /** Filled in by the handler for the log line. */
  log: { operation?: string; principal?: { kind: string; userId: string } };
}

// srvx (the server under h3) sends its own Response class straight to the socket, without
// the web stream a standard Response wraps around its body.
export function jsonResponse(body: unknown, status: number, headers: Headers): Response {
  const out = new Headers(headers);
  out.set("content-type", "application/json; charset=utf-8");
  return new FastResponse(JSON.stringify(body), { status, headers: out });
}

/** Renders any thrown value in the surface's envelope; unexpected ones are masked and logged. */
export function errorResponse(surface: Surface | "rpc", error: unknown, scope: RequestScope, log: Logger): Response {
  const serviceError = toServiceError(error);
  if (serviceError.code === "INTERNAL") log.error({ requestId: scope.requestId, error: describe(error) });
  const headers = new Headers(scope.responseHeaders);
  for (const [name, value] of Object.entries(serviceError.headers ?? {})) {
    // spec 7.2: Platform 429s carry no Retry-After, whoever set the limit; clients back off on their own.
    if (surface === "platform" && name.toLowerCase() === "retry-after") continue;
    headers.set(name, value);
  }
  return jsonResponse(errorBody(surface, serviceError, scope.requestId), serviceError.status, headers);
}

/**
 * Wraps a route: a request id, an abort signal tied to the client, the surface's error
 * envelope, and one JSON log line per request.
 */
export function instrument(surface: Surface | "rpc", log: Logger, handler: (event: H3Event, scope: RequestScope) => Promise<Response>) {
  return async (event: H3Event): Promise<Response> => {
    const started = performance.now();
    const request = event.req;
    const abort = new AbortController();
    request.signal?.addEventListener("abort", () => abort.abort(), { once: true });
    const scope: RequestScope = {
      requestId: randomUUID(),
      responseHeaders: new Headers(),
      abort,
      ip: getRequestIP(event) ?? "unknown",
      log: {},
    };
    // spec 4.2: X-Service-Request-Id is the only service-specific header on the Platform API.
    if (surface !== "platform") scope.responseHeaders.set("x-request-id", scope.requestId);
    let response: Response;
    try {
      response = await handler(event, scope);
    } catch (error) {
      response = errorResponse(surface, error, scope, log);
    }
    log.info({
      requestId: scope.requestId,
      surface,
      method: request.method,
      path: new URL(request.url).pathname,
      status: response.status,
      durationMs: Math.round((performance.now() - started) * 100) / 100,
      ...(scope.log.operation ? { operation: scope.log.operation } : {}),
      ...(scope.log.principal ? { principal: scope.log.principal } : {}),
    });
    return response;
  };
}
