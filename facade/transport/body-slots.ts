import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ServiceError } from "../../rpc/errors.js";
import type { Logger } from "../../rpc/log.js";
import { renderError, surfaceOfPath } from "../../rpc/surfaces.js";

/**
 * HTTP_BODIES_PER_CLIENT (docs/quotas.md "Bodies being read"): request bodies one client (one
 * remote address) may have arriving at once on this instance. Each is read into memory up to
 * GATEWAY_MAX_PAYLOAD_BYTES, so a client trickling many bodies at once would hold that much
 * memory; past the bound the next is answered 429 in its surface's envelope before it is read.
 * Counted per instance (what it protects is this process's memory and sockets): a body counts
 * from the moment its request's headers arrive until its last byte has arrived (whether or not
 * the service has read it yet) or the request ended.
 * `limit` 0: unbounded.
 */
export function bodySlots(limit: number, log: Logger) {
  /** Requests whose bodies were still arriving when last looked at, by client. */
  const arriving = new Map<string, Set<IncomingMessage>>();
  /** The client's bodies still arriving now: the ones that arrived whole, or whose request ended, are dropped. */
  const stillArriving = (client: string) => {
    const set = arriving.get(client);
    if (!set) return undefined;
    for (const req of set) if (req.complete || req.destroyed) set.delete(req);
    if (set.size === 0) arriving.delete(client);
    return set.size === 0 ? undefined : set;
  };
  return {
    /** Bodies arriving now from `client` (for tests and metrics). */
    arriving: (client: string) => stillArriving(client)?.size ?? 0,
    /** Counts `req`'s body for its client, or answers 429 and returns false. */
    admit(req: IncomingMessage, res: ServerResponse): boolean {
      if (limit === 0 || req.complete) return true;
      if (req.headers["transfer-encoding"] === undefined && !(Number(req.headers["content-length"] ?? 0) > 0)) return true;
      const client = req.socket.remoteAddress ?? "";
      const set = stillArriving(client);
      if (set && set.size >= limit) {
        refuse(req, res, set.size);
        return false;
      }
      if (set) set.add(req);
      else arriving.set(client, new Set([req]));
      // A request that ends is forgotten at once (the rest are looked at again on the client's next request).
      req.once("close", () => stillArriving(client));
      return true;
    },
  };

  function refuse(req: IncomingMessage, res: ServerResponse, count: number): void {
    const requestId = randomUUID();
    const error = new ServiceError(
      "RATE_LIMITED",
      `Too many request bodies arriving at once from this client (${count}); the limit is ${limit} per client; retry once one has arrived`,
      { headers: { "retry-after": "1" }, details: { limit, count } },
    );
    const rendered = renderError(surfaceOfPath(req.url ?? "/") ?? "gateway", error, requestId, log);
    log.info({ requestId, event: "http.bodies_per_client", status: 429, limit, operatorNote: { variable: "HTTP_BODIES_PER_CLIENT" } });
    // The unread body is not waited for: the connection closes with the answer.
    rendered.headers.set("content-type", "application/json");
    rendered.headers.set("connection", "close");
    res.writeHead(rendered.status, Object.fromEntries(rendered.headers));
    res.end(JSON.stringify(rendered.body));
  }
}
