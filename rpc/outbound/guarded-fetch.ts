import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import type { OutboundGuard } from "./outbound-guard.js";

/** The `fetch` signature clients such as the MCP SDK accept in place of the global one. */
export type GuardedFetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

function bodyOf(body: RequestInit["body"]): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return body;
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (body instanceof URLSearchParams) return body.toString();
  throw new TypeError("guarded fetch: only string and byte bodies are supported");
}

/**
 * A `fetch` whose every connection goes through `guard` (OutboundGuard.open: the guard's
 * `lookup` and agents, so the address checked is the address connected to). Redirects are not
 * followed: the caller sees the 3xx and decides (a followed redirect would still be checked,
 * but a client that does not expect one is better told).
 */
export function toGuardedFetch(guard: OutboundGuard): GuardedFetch {
  return (input, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(String(input));
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((value, name) => {
        headers[name] = value;
      });
      let body: string | Uint8Array | undefined;
      let req: ReturnType<OutboundGuard["open"]>;
      try {
        body = bodyOf(init.body);
        req = guard.open(url, { method: init.method ?? "GET", headers, ...(init.signal ? { signal: init.signal } : {}) });
      } catch (error) {
        reject(error);
        return;
      }
      req.once("error", reject);
      req.once("response", (res: IncomingMessage) => {
        const responseHeaders = new Headers();
        for (let i = 0; i < res.rawHeaders.length; i += 2) responseHeaders.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
        const status = res.statusCode ?? 502;
        const empty = NULL_BODY_STATUSES.has(status) || init.method === "HEAD";
        if (empty) res.resume();
        resolve(
          new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status: status < 200 || status > 599 ? 502 : status,
            statusText: res.statusMessage,
            headers: responseHeaders,
          }),
        );
      });
      // One write: with the body given to end(), Node sends a Content-Length instead of chunks
      // and the request goes out in one piece (a separate end() was a second socket write).
      req.end(body);
    });
}

/** What guardedRequest sends: a small JSON request of a client that reads the answer as a Node stream. */
export interface GuardedRequestInit {
  method: string;
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

/**
 * One request through `guard` like toGuardedFetch, answered with Node's own response (no Web
 * `Response` and streams around it) and sent in one write: for hot paths that read the answer
 * themselves (the upstream MCP `tools/call`, bridge/upstream/connection.ts).
 */
export function guardedRequest(guard: OutboundGuard, input: string | URL, init: GuardedRequestInit): Promise<IncomingMessage> {
  return new Promise<IncomingMessage>((resolve, reject) => {
    let req: ReturnType<OutboundGuard["open"]>;
    try {
      req = guard.open(typeof input === "string" ? new URL(input) : input, init);
    } catch (error) {
      reject(error);
      return;
    }
    req.once("error", reject);
    req.once("response", resolve);
    req.end(init.body);
  });
}
