import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { getRequestIP, type H3Event } from "h3";
import { FastResponse } from "srvx";
import type { Logger } from "../../rpc/log.js";
import type { Metrics } from "../../rpc/metrics.js";
import { toServiceError, type ServiceError } from "../../rpc/errors.js";
import { profileOf, renderError, SURFACES, type CallSurface } from "../../rpc/surfaces.js";
import type { Dialect } from "../../rpc/define.js";
import type { CallFactsInit } from "../../rpc/call-facts.js";
import { contextFrom, markFailed, SpanKind, spanLogIds, startSpan, tracingEnabled, withSpan } from "../../rpc/tracing.js";

/** What instrument() needs of the services: where log lines and metrics go. */
export interface Observers {
  log: Logger;
  metrics?: Metrics;
}

// A client's X-Request-Id is echoed and logged when it is sane: 1 to 128 visible ASCII characters.
const SANE_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;
// W3C Trace Context: version-traceid-parentid-flags, lowercase hex, ids not all zeros.
const TRACEPARENT = /^[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The caller's `traceparent` when well-formed (passed on to model providers, orchestrator, manager). */
function saneTraceparent(header: string | null | undefined): string | undefined {
  const value = header?.trim().toLowerCase();
  return value && TRACEPARENT.test(value) && !value.startsWith("ff") ? value : undefined;
}

/**
 * What instrument() reads of a request, whichever server object carries it: an h3 event, or
 * the Node request itself on the routes served without h3 (facade/native-routes.ts).
 */
export interface RequestView {
  method: string;
  /** The path without the query (which may carry a token). */
  path: string;
  header(name: string): string | null | undefined;
  ip: string | undefined;
  /** The Node request and response, when on Node: the client's abort and the answer's delivery follow them. */
  node?: { req: IncomingMessage; res: ServerResponse };
  /** Off Node, the request's own abort signal. */
  signal?: AbortSignal;
}

type NodePair = { req?: IncomingMessage; res?: ServerResponse };

/** The view of an h3 event's request. */
function viewOf(event: H3Event): RequestView {
  const request = event.req;
  const node = (request as { runtime?: { node?: NodePair } }).runtime?.node;
  return {
    method: request.method,
    path: event.url.pathname,
    header: (name) => request.headers.get(name),
    ip: getRequestIP(event),
    // srvx makes `request.signal` (a controller and listeners) on first read: read only off Node.
    ...(node?.req && node.res ? { node: { req: node.req, res: node.res } } : { signal: request.signal }),
  };
}

export interface RequestScope {
  /** The service's own id of the request (a fresh UUID, whatever the client sent). */
  requestId: string;
  /** The client's `X-Request-Id`, when sane: echoed in `X-Request-Id` and logged beside `requestId`. */
  clientRequestId?: string;
  /** Headers for the response, error or not. */
  responseHeaders: Headers;
  /** Aborted when the client disconnects. */
  abort: AbortController;
  ip: string;
  /** The caller's W3C `traceparent`, when well-formed. */
  traceparent?: string;
  /**
   * For a streamed answer: the log line and metrics wait until the returned function is called
   * (the stream's end), so they carry its full duration and what the stream metered. Called
   * with the error that cut the stream, the request counts as that error, not as its 200.
   */
  defer(): (error?: unknown) => void;
  /**
   * Resolves true once the answer's last byte was handed to the socket, false when the
   * connection closed before (the client went away). Made on first call; undefined off Node.
   * Paid requests settle on it (docs/crash-consistency.md "No charge without an answer").
   */
  delivered?(): Promise<boolean>;
  /** Filled in by the handler for the log line (chat adds model, tokens, cost, latencies). */
  log: { operation?: string; principal?: { kind: string; userId: string }; [field: string]: unknown };
}

// srvx (the server under h3) sends its own Response class straight to the socket, without
// the web stream a standard Response wraps around its body.
export function jsonResponse(body: unknown, status: number, headers: Headers): Response {
  const out = new Headers(headers);
  out.set("content-type", "application/json; charset=utf-8");
  return new FastResponse(JSON.stringify(body), { status, headers: out });
}

/**
 * The facts of a call a request makes, as its scope knows them (spread into `callFacts`): its
 * request id, the client's abort signal, the header sink, the address, `traceparent`, and the
 * request's log line for the call's fields.
 */
export function scopeFacts(scope: RequestScope): Omit<CallFactsInit, "surface" | "transport"> {
  return {
    requestId: scope.requestId,
    signal: scope.abort.signal,
    responseHeaders: scope.responseHeaders,
    ip: scope.ip,
    ...(scope.traceparent ? { traceparent: scope.traceparent } : {}),
    logFields: scope.log,
  };
}

/** A middleware's refusal: `error` answered in the surface's envelope, logged and counted like any request. */
export function refuse(event: H3Event, surface: CallSurface, observers: Observers, error: ServiceError): Promise<Response> {
  return instrument(surface, observers, async () => {
    throw error;
  })(event);
}

/** Renders any thrown value in the surface's envelope, or its route's dialect's (renderError), as a response. */
export function errorResponse(
  surface: CallSurface,
  error: unknown,
  requestId: string,
  log: Logger,
  headers?: Headers,
  dialect?: Dialect,
): Response {
  const rendered = renderError(surface, error, requestId, log, headers, dialect);
  return jsonResponse(rendered.body, rendered.status, rendered.headers);
}

/**
 * Aborted when the client goes away before the answer is complete. On Node the response's
 * `close` is watched directly, as srvx does for `request.signal`, without first creating
 * srvx's own controller and chaining ours to it (two controllers per request); elsewhere
 * (a `fetch` call of the app) the request's signal is followed.
 */
function clientAbort(view: RequestView): AbortController {
  const abort = new AbortController();
  if (view.node) {
    const { req, res } = view.node;
    const onClose = () => {
      if (req.errored || !res.writableEnded) abort.abort();
    };
    res.once("close", onClose);
    if (res.destroyed || req.aborted || req.errored || (req.destroyed && !req.complete)) onClose();
  } else {
    view.signal?.addEventListener("abort", () => abort.abort(), { once: true });
  }
  return abort;
}

/** When the answer was handed to the socket in full (true) or the connection closed first (false). */
function deliveryOf(view: RequestView): (() => Promise<boolean>) | undefined {
  const res = view.node?.res;
  if (!res) return undefined;
  let delivered: Promise<boolean> | undefined;
  return () =>
    (delivered ??= new Promise<boolean>((resolve) => {
      if (res.writableFinished) return resolve(true);
      if (res.destroyed) return resolve(false);
      // 'finish': the last chunk was handed to the operating system; 'close' first: cut.
      res.once("finish", () => resolve(true));
      res.once("close", () => resolve(res.writableFinished));
    }));
}

export interface InstrumentOptions {
  /** The route's dialect, when it has one: its request-id header is set too (rpc/surfaces.ts DIALECTS). */
  dialect?: Dialect;
  /**
   * The `surface` label of the HTTP metrics and the log line when it differs from the error
   * envelope's surface: MCP requests answer in JSON-RPC's envelope but count as `mcp`.
   */
  label?: string;
}

/**
 * Wraps a route: the service's own request id (a client's sane X-Request-Id is echoed and logged
 * beside it, never taken for it: docs/observability.md), an abort signal tied to
 * the client, the surface's error envelope (or the route's dialect's), one JSON log line and the
 * HTTP metrics per request, and while tracing, the request's server span (continuing the
 * caller's `traceparent`), which every span of the request descends from.
 */
export function instrument(
  surface: CallSurface,
  observers: Observers,
  handler: (event: H3Event, scope: RequestScope) => Promise<Response>,
  dialect?: Dialect,
  options: InstrumentOptions = {},
) {
  const { log } = observers;
  return (event: H3Event): Promise<Response> =>
    instrumentRequest(
      surface,
      observers,
      viewOf(event),
      (scope) => handler(event, scope),
      (error, scope) => errorResponse(surface, error, scope.requestId, log, scope.responseHeaders, dialect),
      dialect ? { ...options, dialect } : options,
    );
}

/**
 * instrument() for any server object: `run` answers through the request's scope, `render`
 * answers an error it threw (in the surface's envelope or the route's dialect's); both give
 * something with a `status`, which is what the log line and the metrics count.
 */
export async function instrumentRequest<R extends { status: number }>(
  surface: CallSurface,
  observers: Observers,
  request: RequestView,
  run: (scope: RequestScope) => Promise<R>,
  render: (error: unknown, scope: RequestScope) => R,
  options: InstrumentOptions = {},
): Promise<R> {
  const { log, metrics } = observers;
  const label = options.label ?? surface;
  const started = performance.now();
  const abort = clientAbort(request);
  let deferred: Promise<void> | undefined;
  let streamError: unknown;
  const incoming = request.header("x-request-id");
  const traceparent = saneTraceparent(request.header("traceparent"));
  const clientRequestId = incoming && SANE_REQUEST_ID.test(incoming) ? incoming : undefined;
  const scope: RequestScope = {
    requestId: randomUUID(),
    ...(clientRequestId ? { clientRequestId } : {}),
    responseHeaders: new Headers(),
    abort,
    ip: request.ip ?? "unknown",
    traceparent,
    delivered: deliveryOf(request),
    log: {},
    defer() {
      let release!: () => void;
      deferred = new Promise<void>((resolve) => (release = resolve));
      const inFlight = metrics?.streamsOf(label, metrics.operation(scope.log.operation));
      inFlight?.inc();
      let open = true;
      return (error?: unknown) => {
        if (!open) return;
        open = false;
        inFlight?.dec();
        if (error !== undefined) streamError = error;
        release();
      };
    },
  };
  const parent = tracingEnabled() ? contextFrom(traceparent) : undefined;
  // The path without its query (which may carry a token); the operation names the span once known.
  const span =
    parent &&
    startSpan(
      request.method,
      SpanKind.SERVER,
      {
        "http.request.method": request.method,
        "url.path": request.path,
        "gateway.surface": label,
        "gateway.request_id": scope.requestId,
      },
      parent,
    );
  // The surface's request-id header (none on the Platform: docs/interface.md 4.2): the client's
  // X-Request-Id echoed when it sent a sane one, else the service's id. The service's own id is
  // also in error bodies, on the route's dialect's own header, and on X-Service-Request-Id, which
  // chat methods set on answers that reached the model router (rpc/chat/methods.ts).
  const requestIdHeader = SURFACES[surface].requestIdHeader;
  if (requestIdHeader) scope.responseHeaders.set(requestIdHeader, clientRequestId ?? scope.requestId);
  const dialectHeader = options.dialect && profileOf(surface, options.dialect).requestIdHeader;
  if (dialectHeader && dialectHeader !== requestIdHeader) scope.responseHeaders.set(dialectHeader, scope.requestId);
  let response: R;
  let refusal: string | undefined;
  try {
    response = await (span ? withSpan(span, () => run(scope), parent) : run(scope));
  } catch (error) {
    // Inside the span, so an unexpected error's log line carries its trace.
    response = span ? withSpan(span, () => render(error, scope), parent) : render(error, scope);
    const known = toServiceError(error);
    if (response.status === 402 || response.status === 429) refusal = known.code;
    // What only the operator is told (the variable behind a limit), never the caller.
    if (known.operatorNote) scope.log.operatorNote = known.operatorNote;
  }
  const finish = () => {
    const seconds = (performance.now() - started) / 1000;
    // A stream cut by an error (an upstream gone mid-answer) was sent as 200 but counts as the error.
    const cut = streamError === undefined ? undefined : toServiceError(streamError);
    const status = cut ? cut.status : response.status;
    if (metrics) {
      const http = metrics.http(label, metrics.operation(scope.log.operation), String(status));
      http.requests.inc();
      http.duration.observe(seconds);
      // Relayed upstream 402/429s and limits answered without a thrown error count as `other`.
      if (response.status === 402 || response.status === 429)
        metrics.refusals.inc({ status: String(response.status), reason: refusal ?? "other" });
    }
    const { operation, principal, ...extra } = scope.log;
    if (span) {
      if (operation) {
        span.updateName(`${request.method} ${operation}`);
        span.setAttribute("gateway.operation", operation);
      }
      span.setAttribute("http.response.status_code", response.status);
      if (status >= 500 || cut) markFailed(span, cut ? cut.code : String(status));
      span.end();
    }
    const line = {
      requestId: scope.requestId,
      ...(clientRequestId ? { clientRequestId } : {}),
      surface: label,
      method: request.method,
      path: request.path,
      status,
      durationMs: Math.round(seconds * 100_000) / 100,
      ...(operation ? { operation } : {}),
      ...(principal ? { principal } : {}),
      ...extra,
      ...(cut ? { sentStatus: response.status, streamError: { code: cut.code, message: cut.message } } : {}),
      ...(span ? spanLogIds(span) : traceparent ? { trace_id: traceparent.slice(3, 35) } : {}),
    };
    // An upstream that cut its stream is not the service's own error: a warning, with its status and cause.
    if (cut) log.warn(line);
    else log.info(line);
  };
  // An error answer is never a stream, whatever the handler deferred.
  if (deferred && response.status < 400) void deferred.then(finish);
  else finish();
  return response;
}
