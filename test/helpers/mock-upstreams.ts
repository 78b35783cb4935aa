import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer as createMockApp } from "@mswjs/http-middleware";
import type { RequestHandler } from "msw";
import { CALL_HEADER, registerCallSignal } from "../../mocks/call-signal.js";

/**
 * msw handlers served on a loopback port. The gateway reaches providers, the orchestrator and
 * the manager through undici's pooled `request()`, which msw's in-process interception does
 * not see; the same handlers are served here by `@mswjs/http-middleware` instead.
 *
 * Handlers keep their own URLs (`http://models.upstream.test/v1/…`): `url(base)` maps such a
 * base to this server (`http://127.0.0.1:<port>/__upstream/http/models.upstream.test/v1`), and
 * the server restores the original scheme, host and path before the handlers see the request,
 * so one server stands in for any number of upstreams. Each request carries a signal that
 * aborts when the caller's connection closes before the answer is complete (mocks/call-signal.ts).
 */
export interface MockUpstreams {
  /** The loopback URL standing for `base` (an absolute http(s) URL the handlers use). */
  url(base: string): string;
  /** Prepends handlers, as msw's `server.use`. */
  use(...handlers: RequestHandler[]): void;
  /** Drops handlers added by `use`. */
  resetHandlers(): void;
  /** Connections the gateway has open to this server now. */
  openConnections(): number;
  /** Connections this server has accepted since it started. */
  acceptedConnections(): number;
  close(): Promise<void>;
}

const PREFIX = "/__upstream/";

export async function serveMockUpstreams(...initial: RequestHandler[]): Promise<MockUpstreams> {
  let extra: RequestHandler[] = [];
  // An express app answering with the handlers (404 JSON for anything unmatched). The handler
  // types of msw's CommonJS and ESM builds differ in name only.
  type App = (req: IncomingMessage, res: ServerResponse) => void;
  const build = () => {
    const express = createMockApp(...([...extra, ...initial] as never[]));
    // req.protocol from X-Forwarded-Proto, so https handler URLs match too.
    express.set("trust proxy", true);
    return express as unknown as App;
  };
  let app = build();
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    // /__upstream/<scheme>/<host>/<path…> → the handler's own origin and path.
    if (req.url?.startsWith(PREFIX)) {
      const [scheme, host, ...rest] = req.url.slice(PREFIX.length).split("/");
      req.headers.host = host;
      req.headers["x-forwarded-proto"] = scheme;
      req.url = `/${rest.join("/")}`;
    }
    const id = randomUUID();
    const controller = new AbortController();
    const unregister = registerCallSignal(id, controller.signal);
    req.headers[CALL_HEADER] = id;
    res.once("close", () => {
      if (!res.writableFinished) controller.abort(new Error("The caller closed the connection"));
      unregister();
    });
    // A network error (`HttpResponse.error()`, status 0) drops the connection.
    const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
    res.writeHead = ((status: number, ...rest: unknown[]) => {
      if (status === 0) {
        res.socket?.destroy();
        return res;
      }
      return writeHead(status, ...rest);
    }) as typeof res.writeHead;
    app(req, res);
  };
  const server: Server = createServer(handle);
  const sockets = new Set<Socket>();
  let accepted = 0;
  server.on("connection", (socket) => {
    accepted++;
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url(base) {
      const parsed = new URL(base);
      return `${origin}${PREFIX}${parsed.protocol.replace(":", "")}/${parsed.host}${parsed.pathname.replace(/\/$/, "")}`;
    },
    use(...handlers) {
      extra = [...handlers, ...extra];
      app = build();
    },
    resetHandlers() {
      extra = [];
      app = build();
    },
    openConnections: () => sockets.size,
    acceptedConnections: () => accepted,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The same with msw's `setupServer` shape, for a module-level declaration:
 * `const msw = mockUpstreams(...handlers)`, `await msw.listen()` in `beforeAll`, then
 * `msw.url(BASE)` in the configuration and `await msw.close()` at the end.
 */
export function mockUpstreams(...handlers: RequestHandler[]) {
  let served: MockUpstreams | undefined;
  const live = () => {
    if (!served) throw new Error("mockUpstreams: call listen() first");
    return served;
  };
  return {
    async listen(): Promise<void> {
      served ??= await serveMockUpstreams(...handlers);
    },
    url: (base: string) => live().url(base),
    use: (...extra: RequestHandler[]) => live().use(...extra),
    resetHandlers: () => live().resetHandlers(),
    openConnections: () => live().openConnections(),
    acceptedConnections: () => live().acceptedConnections(),
    async close(): Promise<void> {
      await served?.close();
      served = undefined;
    },
  };
}
