import type { IncomingMessage, Server as NodeServer } from "node:http";
import { serve } from "h3";
import { plugin as crossws } from "crossws/server";
import type { Config } from "../rpc/config.js";
import type { Dispatcher } from "../rpc/dispatcher.js";
import { createLogger, type LogSink } from "../rpc/log.js";
import { compose, type Composition } from "../rpc/compose.js";
import { buildApp } from "./app.js";
import { bridgeTransports } from "../bridge/transports.js";
import { defineToolBridge, type ToolBridge } from "../bridge/tool-bridge.js";
import { SURFACE_BASES } from "../rpc/surfaces.js";
import type { ResolveHost } from "../rpc/outbound/outbound-guard.js";
import { healthTransport, type Lifecycle } from "./health.js";
import { trackInFlight } from "./drain.js";
import { metricsTransport } from "./metrics.js";
import { nativeRoutes } from "./native-routes.js";
import { pacedRequests } from "./transport/pacing.js";
import { bodySlots } from "./transport/body-slots.js";

export interface RunningServer {
  /** Origin the server listens on, e.g. `http://127.0.0.1:8787`. */
  origin: string;
  /** Base URL of each surface. */
  urls: Record<string, string>;
  /** The core's ports, each domain module's deps, and `close` (rpc/compose.ts). */
  composition: Composition;
  /** The concrete tool bridge behind the tools domain's `catalog`, `vms` and `upstream`. */
  bridge: ToolBridge;
  dispatcher: Dispatcher;
  /** `draining` turns true when drain() starts (/readyz answers 503 from then on). */
  lifecycle: Lifecycle;
  /**
   * Graceful stop: /readyz turns 503, the listening socket closes (new connections are
   * refused), in-flight requests and streams run up to `graceMs`, then sockets get 1001, MCP
   * streams end, background work stops and storage closes last. Idempotent.
   */
  drain(graceMs: number): Promise<void>;
  /** Stops at once (drain with no grace). */
  close(): Promise<void>;
}

/**
 * A request body that stops arriving for `idleMs` closes the connection. The deadline runs while
 * the service reads the body only: not before it starts reading (a call checks its credential
 * first, and that may wait on storage, which STORAGE_TIMEOUT_MS bounds), not while it stops
 * reading (backpressure), and not once the body has arrived, so an answer streamed for minutes
 * (SSE) is never cut by it. A WebSocket upgrade has no body here.
 */
function cutIdleBodies(node: NodeServer, idleMs: number): void {
  node.on("request", (request: IncomingMessage) => {
    const hasBody = request.headers["transfer-encoding"] !== undefined || Number(request.headers["content-length"] ?? 0) > 0;
    if (!hasBody || request.complete) return;
    const socket = request.socket;
    const reading = () => socket.setTimeout(idleMs);
    const waiting = () => socket.setTimeout(0);
    const done = () => {
      request.off("resume", reading);
      request.off("pause", waiting);
      socket.setTimeout(0);
    };
    // Already flowing (a reader attached in the same turn): the deadline runs from now.
    if (request.readableFlowing) reading();
    request.on("resume", reading);
    request.on("pause", waiting);
    request.once("end", done);
    request.once("close", done);
  });
}

export interface StartOptions {
  /** Where log lines go (default stdout). */
  logSink?: LogSink;
  /**
   * Name resolution for every outbound connection the address rule guards (default: the
   * system resolver). Tests pass one so a public-looking name resolves to loopback.
   */
  resolveHost?: ResolveHost;
}

/**
 * The composition root: opens storage and the tool bridge, builds the dispatcher and the app
 * with the bridge's transports, and listens on HOST:PORT (0 = any free port). The only facade
 * file that imports bridge/ (docs/architecture.md).
 */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const log = createLogger(config.LOG_LEVEL, options.logSink);
  const tools = defineToolBridge();
  const composition = await compose(config, log, tools.open, { resolveHost: options.resolveHost });
  const bridge = tools.get();
  try {
    const { dispatcher } = composition;
    composition.ports.metrics.knowOperations(Object.keys(dispatcher.registry));
    const lifecycle: Lifecycle = { draining: false };
    const app = buildApp(dispatcher, [healthTransport(lifecycle), metricsTransport, ...bridgeTransports(bridge)]);
    const server = serve(app, {
      port: config.PORT,
      hostname: config.HOST,
      silent: true,
      gracefulShutdown: false,
      // Slow clients (docs/security.md "Slow clients"): node:http cuts a connection whose headers
      // or whole request do not arrive in time, checked every second.
      node: {
        // srvx listens with exclusive: true; node:cluster workers (WORKERS, docs/operating.md)
        // must share the primary's handle, or the port closes on Node 24 when one worker dies.
        exclusive: false,
        headersTimeout: config.HTTP_HEADERS_TIMEOUT_SECONDS * 1000,
        requestTimeout: Math.max(config.HTTP_REQUEST_TIMEOUT_SECONDS, config.HTTP_HEADERS_TIMEOUT_SECONDS + 1) * 1000,
        connectionsCheckingInterval: 1000,
      },
      // docs/interface.md 8: GATEWAY_MAX_PAYLOAD_BYTES also bounds WebSocket messages (ws closes with 1009 past it).
      plugins: [crossws({ options: { node: { serverOptions: { maxPayload: config.GATEWAY_MAX_PAYLOAD_BYTES } } } })],
    });
    // No TLS nor HTTP/2 here: srvx made a node:http server.
    const node = server.node!.server as NodeServer;
    // The plainest POSTs to routes without path parameters are answered without h3 (facade/native-routes.ts);
    // everything else goes on to srvx and the h3 app.
    const native = nativeRoutes(dispatcher);
    const viaH3 = server.node!.handler;
    node.removeListener("request", viaH3);
    // A burst of new requests is started over several turns of the loop, so the streams already
    // open keep getting their frames (facade/transport/pacing.ts).
    // Bodies one client may have arriving at once (HTTP_BODIES_PER_CLIENT, facade/transport/body-slots.ts).
    const bodies = bodySlots(config.HTTP_BODIES_PER_CLIENT, log);
    node.on(
      "request",
      pacedRequests((req, res) => {
        if (!bodies.admit(req, res)) return;
        if (!native.take(req, res)) void viaH3(req, res);
      }),
    );
    cutIdleBodies(node, config.HTTP_BODY_IDLE_TIMEOUT_SECONDS * 1000);
    const inFlight = trackInFlight(node, lifecycle);
    await server.ready();
    const listening = new URL(server.url!);
    const origin = (config.PUBLIC_URL ?? listening.origin).replace(/\/$/, "");
    const urls: Record<string, string> = {
      platform: origin + SURFACE_BASES.platform,
      consoleKeys: `${origin}/api/api-keys`,
      account: origin + SURFACE_BASES.account,
      gateway: origin + SURFACE_BASES.gateway,
      bridge: origin + SURFACE_BASES.bridge,
      jsonRpc: `${origin}/rpc`,
      openapi: `${origin}/openapi.json`,
      docs: `${origin}/docs`,
      console: `${origin}/console`,
    };
    let draining: Promise<void> | undefined;
    const running: RunningServer = {
      origin: listening.origin,
      urls,
      composition,
      bridge,
      dispatcher,
      lifecycle,
      drain(graceMs) {
        return (draining ??= (async () => {
          lifecycle.draining = true;
          // Stops listening: new connections are refused; idle keep-alive ones close now.
          if (node.listening) node.close(() => undefined);
          await inFlight.settled(graceMs);
          // Past the grace (or with none): whatever is still open is cut.
          await server.close(true);
          await composition.close();
        })());
      },
      close() {
        return running.drain(0);
      },
    };
    return running;
  } catch (error) {
    await composition.close();
    throw error;
  }
}
