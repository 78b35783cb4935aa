import { Agent, errors, type Dispatcher } from "undici";

/**
 * The one HTTP client for the upstreams an operator configures: model providers, the
 * orchestrator and the manager (docs/performance.md "Upstream client"). undici's `Agent`
 * keeps a pool of kept-alive connections per origin and `request()` hands the body back as a
 * Node stream: no web `fetch`, no `Response`, no web-stream conversion per call.
 *
 * Time limits are undici's own per-request `headersTimeout` (first byte of the answer) and
 * `bodyTimeout` (each gap between body chunks): a timer the connection already has, refreshed
 * per chunk, instead of an `AbortSignal.timeout` + `AbortSignal.any` chain per request. The
 * caller's signal is passed as it is; when it aborts (the client went away), undici destroys
 * the connection, so the upstream sees its socket close and stops working.
 *
 * These upstreams are the operator's own configuration, so the private-address rule of
 * user-supplied URLs (rpc/outbound/outbound-guard.ts) does not apply to them, as before.
 */
const agent = new Agent({
  keepAliveTimeout: 10_000,
  keepAliveMaxTimeout: 60_000,
  // Upstreams are often on the same host or network: start sending at once.
  connect: { noDelay: true },
});

export interface UpstreamRequest {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  headers?: Record<string, string>;
  body?: string | Buffer | Uint8Array | null;
  /** Aborts the request (or the body being read) and closes its connection. */
  signal?: AbortSignal;
  /** Limit on the wait for the answer's headers and on each gap in its body, ms. */
  timeoutMs: number;
  /** Limit on each gap in the body instead (0: none, for a long-lived event stream). */
  bodyTimeoutMs?: number;
}

export type UpstreamResponse = Dispatcher.ResponseData;

/** Sends one request on the shared pool; the body is a Node stream to read or dump. */
export function upstreamRequest(url: string, options: UpstreamRequest): Promise<UpstreamResponse> {
  return agent.request({
    origin: originOf(url),
    path: pathOf(url),
    method: options.method,
    headers: options.headers,
    body: options.body ?? null,
    signal: options.signal,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.bodyTimeoutMs ?? options.timeoutMs,
  });
}

/** True when `error` is undici's headers or body timeout (the upstream went silent). */
export function isUpstreamTimeout(error: unknown): boolean {
  return error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError;
}

const ORIGIN = /^(https?:\/\/[^/?#]+)/i;

function originOf(url: string): string {
  const match = ORIGIN.exec(url);
  if (!match) throw new TypeError(`Not an http(s) URL: ${url}`);
  return match[1]!;
}

function pathOf(url: string): string {
  const path = url.slice(originOf(url).length);
  return path.startsWith("/") ? path : `/${path}`;
}
