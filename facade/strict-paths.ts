import { randomUUID } from "node:crypto";
import type { IncomingMessage, Server as NodeServer, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { ServiceError } from "../rpc/errors.js";
import type { Logger } from "../rpc/log.js";
import { errorBody, surfaceOfPath } from "../rpc/transport/surfaces.js";

/**
 * Strict paths (docs/security.md "Strict paths"). The URL parser under the router resolves
 * `.` and `..` segments, encoded (`%2e%2e`) or not, so `/api/v1/%2e%2e/%2e%2e/gateway/v1/auth/me`
 * used to be served as the Gateway's `/auth/me`: a front proxy that allows or denies by path
 * prefix could be walked around. A request target whose path has a dot segment (literal or
 * percent-encoded), an encoded slash (`%2F`) or a backslash (literal or `%5C`) is answered 400
 * before routing, on every surface and on WebSocket upgrades.
 */
export function pathProblem(target: string | undefined): string | undefined {
  if (!target || target === "*") return undefined;
  let path = target;
  // absolute-form (RFC 9112 3.2.2): the path starts after the authority.
  const absolute = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(path);
  if (absolute) path = path.slice(absolute[0].length);
  const end = path.search(/[?#]/);
  if (end >= 0) path = path.slice(0, end);
  if (/\\|%5c/i.test(path)) return "a backslash";
  if (/%2f/i.test(path)) return "an encoded slash (%2F)";
  for (const segment of path.split("/")) {
    const decoded = segment.replace(/%2e/gi, ".");
    if (decoded === "." || decoded === "..") return segment === decoded ? `a '${decoded}' segment` : `an encoded '${decoded}' segment (${segment})`;
  }
  return undefined;
}

/** The refusal: the envelope of the surface the raw path starts with (`/rpc`: JSON-RPC), else the plain JSON one. */
function refusal(target: string, problem: string, requestId: string) {
  const error = new ServiceError("BAD_REQUEST", `Request path refused: it contains ${problem}; paths must not contain '.' or '..' segments (encoded or not), encoded slashes or backslashes`, {
    details: { reason: "path" },
  });
  const path = target.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, "").split(/[?#]/)[0]!;
  const surface = path === "/rpc" || path.startsWith("/rpc/") ? "rpc" : surfaceOfPath(path);
  return { status: error.status, body: JSON.stringify(errorBody(surface ?? "gateway", error, requestId)), surface: surface ?? "none" };
}

/**
 * Puts the check in front of the server's own `request` and `upgrade` listeners (the app and
 * the WebSocket upgrade), so nothing routes a refused path.
 */
export function guardStrictPaths(server: NodeServer, log: Logger): void {
  const requestListeners = server.listeners("request") as ((req: IncomingMessage, res: ServerResponse) => void)[];
  server.removeAllListeners("request");
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const problem = pathProblem(req.url);
    if (!problem) {
      for (const listener of requestListeners) listener.call(server, req, res);
      return;
    }
    const requestId = randomUUID();
    const answer = refusal(req.url!, problem, requestId);
    log.info({ requestId, surface: answer.surface, method: req.method, path: req.url, status: answer.status, refused: "path" });
    // The body is not read: the connection closes after the answer.
    // spec 4.2: no service headers of its own on the Platform API.
    res.writeHead(answer.status, { "content-type": "application/json; charset=utf-8", ...(answer.surface === "platform" ? {} : { "x-request-id": requestId }), connection: "close" });
    res.end(answer.body);
  });
  const upgradeListeners = server.listeners("upgrade") as ((req: IncomingMessage, socket: Duplex, head: Buffer) => void)[];
  server.removeAllListeners("upgrade");
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const problem = pathProblem(req.url);
    if (!problem) {
      for (const listener of upgradeListeners) listener.call(server, req, socket, head);
      return;
    }
    const requestId = randomUUID();
    const answer = refusal(req.url!, problem, requestId);
    log.info({ requestId, surface: answer.surface, method: req.method, path: req.url, status: answer.status, refused: "path" });
    socket.end(
      `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json; charset=utf-8\r\nx-request-id: ${requestId}\r\ncontent-length: ${Buffer.byteLength(answer.body)}\r\nconnection: close\r\n\r\n${answer.body}`,
    );
  });
}
