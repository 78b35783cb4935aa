import type { IncomingMessage, Server } from "node:http";
import type { Lifecycle } from "./health.js";

export interface InFlight {
  /** Requests being answered now (streams included, subscriptions excluded). */
  readonly count: number;
  /** Resolves when no request is in flight, or after `graceMs`, whichever comes first. */
  settled(graceMs: number): Promise<void>;
}

/**
 * A GET that waits for events (an MCP GET stream, `GET /agents/{id}/events`) never ends by
 * itself: a drain does not wait for it; it ends when its session closes, so the client
 * reconnects to another instance.
 */
function isSubscription(req: IncomingMessage): boolean {
  return req.method === "GET" && (req.headers.accept ?? "").includes("text/event-stream");
}

/**
 * Counts the requests in flight on the Node server (a response counts until its body ends or
 * the client goes away, so SSE streams are waited for). While draining, answers say
 * `Connection: close` and idle keep-alive connections are closed, so clients move on.
 */
export function trackInFlight(server: Server, lifecycle: Lifecycle): InFlight {
  let count = 0;
  const waiters = new Set<() => void>();
  server.on("request", (req, res) => {
    // Node then answers `Connection: close` and ends the connection after this response.
    if (lifecycle.draining) res.shouldKeepAlive = false;
    if (isSubscription(req)) return;
    count += 1;
    res.once("close", () => {
      count -= 1;
      if (lifecycle.draining) server.closeIdleConnections();
      if (count === 0) for (const wake of waiters) wake();
    });
  });
  return {
    get count() {
      return count;
    },
    async settled(graceMs) {
      server.closeIdleConnections();
      if (count === 0 || graceMs <= 0) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, graceMs);
        waiters.add(done);
      });
    },
  };
}
