import type { IncomingMessage, Server as NodeServer, ServerOptions, ServerResponse } from "node:http";
import type { Config } from "../rpc/config.js";

type Deadlines = Pick<Config, "HTTP_HEADERS_TIMEOUT_MS" | "HTTP_REQUEST_TIMEOUT_MS" | "HTTP_BODY_IDLE_TIMEOUT_MS">;

/**
 * Deadlines for slow clients (docs/security.md "Slow clients"), given to `http.createServer`:
 * the headers within HTTP_HEADERS_TIMEOUT_MS and the whole request within
 * HTTP_REQUEST_TIMEOUT_MS, else Node answers 408 and closes. Node checks them every
 * `connectionsCheckingInterval`, here a tenth of the shorter deadline (at most 1 s), so a
 * deadline is kept within about 10 %. Neither counts once the request is in: an SSE answer
 * runs as long as it runs, and an upgraded WebSocket leaves the HTTP server's connections.
 */
export function deadlineOptions(config: Deadlines): ServerOptions {
  const shorter = Math.min(config.HTTP_HEADERS_TIMEOUT_MS, config.HTTP_REQUEST_TIMEOUT_MS);
  return {
    headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(shorter / 10))),
  };
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined;
}

/**
 * The idle body deadline: while a request's body is coming in, a socket that receives nothing
 * for HTTP_BODY_IDLE_TIMEOUT_MS gets 408 and is closed (the handler reading the body sees it
 * aborted). Once the body is in, the socket's own timeout is off again, so a long answer
 * (SSE) is never cut for being quiet.
 */
export function guardIdleBodies(server: NodeServer, config: Deadlines): void {
  const idleMs = config.HTTP_BODY_IDLE_TIMEOUT_MS;
  server.prependListener("request", (req: IncomingMessage, res: ServerResponse) => {
    if (!hasBody(req) || req.complete) return;
    const socket = req.socket;
    const onTimeout = () => {
      if (req.complete) return;
      // An answer already under way (refused before the body was read) is not followed by a 408.
      if (res.headersSent) socket.destroy();
      else socket.end("HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
      socket.destroySoon?.();
      setTimeout(() => socket.destroy(), 1000).unref();
    };
    // IncomingMessage.setTimeout arms the socket's inactivity timer (reads and writes reset it)
    // and listens on the request, so Node's own handler does not destroy the socket first.
    req.setTimeout(idleMs, onTimeout);
    const disarm = () => {
      req.off("timeout", onTimeout);
      socket.setTimeout(0);
    };
    req.once("end", disarm);
    req.once("close", disarm);
  });
}
