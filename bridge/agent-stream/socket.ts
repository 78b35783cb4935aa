import { randomUUID } from "node:crypto";
import { defineWebSocketHandler, type H3 } from "h3";
import { authenticate, type Presented, type Principal } from "../../rpc/auth.js";
import type { Dispatcher } from "../../rpc/dispatcher.js";
import { describe } from "../../rpc/dispatcher.js";
import { ServiceError, toServiceError } from "../../rpc/errors.js";
import type { Services } from "../../rpc/services.js";
import { jsonResponse } from "../../rpc/transport/instrument.js";
import { SURFACE_BASES, errorBody, presentedFor } from "../../rpc/transport/surfaces.js";
import { AgentStreamSession } from "./session.js";

/** `WS {gateway_base_url}/agents/stream` (spec 4.4, messages per spec 2.7). */
export const AGENT_STREAM_PATH = `${SURFACE_BASES.gateway}/agents/stream`;
/** The subprotocol this socket speaks; echoed back when offered (browsers require an echo). */
export const AGENT_STREAM_SUBPROTOCOL = "agent-stream.v1";
/** For browsers, which cannot set headers on a WebSocket: offer `bearer.<token>` next to `agent-stream.v1`. */
const BEARER_PROTOCOL = "bearer.";

interface PeerState {
  principal?: Principal;
  requestId?: string;
  session?: AgentStreamSession;
}

function offeredProtocols(request: Request): string[] {
  return (request.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim()).filter(Boolean);
}

/** spec 5 (gateway): `Authorization: Bearer`, `X-API-Key`, or the `bearer.<token>` subprotocol. */
function presentedOnUpgrade(request: Request): Presented {
  const presented = presentedFor("gateway", request);
  if (presented.bearer || presented.apiKey) return presented;
  const viaProtocol = offeredProtocols(request).find((p) => p.startsWith(BEARER_PROTOCOL));
  return viaProtocol ? { bearer: viaProtocol.slice(BEARER_PROTOCOL.length) } : presented;
}

/**
 * A browser page may only open the socket from an allowed origin (GATEWAY_CORS_ORIGINS):
 * nothing else checks `Origin` on an upgrade. Non-browser clients send none.
 */
function checkOrigin(request: Request, services: Services): void {
  const origin = request.headers.get("origin");
  if (!origin) return;
  const allowed = services.config.GATEWAY_CORS_ORIGINS.split(",").map((o) => o.trim().replace(/\/$/, "")).filter(Boolean);
  if (allowed.includes("*") || allowed.includes(origin)) return;
  throw new ServiceError("FORBIDDEN", `Origin ${origin} is not allowed to open the agent stream`);
}

/**
 * The agent stream: authenticated in the upgrade (401/403 refuse it with the Gateway's JSON
 * error), then one AgentStreamSession per socket (bridge/_agent-stream-session.ts).
 */
export function agentStreamTransport(app: H3, dispatcher: Dispatcher): void {
  const services = dispatcher.services;
  const orchestratorMode = Boolean(services.config.ORCH_BASE_URL);
  app.on(
    "GET",
    AGENT_STREAM_PATH,
    defineWebSocketHandler({
      async upgrade(request) {
        const requestId = randomUUID();
        try {
          checkOrigin(request, services);
          const principal = (await authenticate(presentedOnUpgrade(request), { kinds: ["session", "gateway_key"] }, services))!;
          services.log.info({ requestId, event: "agent_stream.upgrade", status: 101, principal: { kind: principal.kind, userId: principal.userId } });
          const protocol = offeredProtocols(request).includes(AGENT_STREAM_SUBPROTOCOL) ? AGENT_STREAM_SUBPROTOCOL : undefined;
          return { headers: { "x-request-id": requestId }, ...(protocol ? { protocol } : {}), context: { principal, requestId } satisfies PeerState };
        } catch (error) {
          const serviceError = toServiceError(error);
          if (serviceError.code === "INTERNAL") services.log.error({ requestId, error: describe(error) });
          else services.log.info({ requestId, event: "agent_stream.upgrade", status: serviceError.status });
          const headers = new Headers({ "x-request-id": requestId, ...serviceError.headers });
          if (serviceError.status === 401) headers.set("www-authenticate", 'Bearer realm="gateway"');
          return jsonResponse(errorBody("gateway", serviceError, requestId), serviceError.status, headers);
        }
      },
      open(peer) {
        const state = peer.context as PeerState;
        if (!state.principal || !state.requestId) return peer.close(1011, "no identity");
        state.session = new AgentStreamSession({
          services,
          principal: state.principal,
          requestId: state.requestId,
          orchestratorMode,
          send: (frame) => {
            try {
              peer.send(JSON.stringify(frame));
            } catch {
              // The socket is closing; its close handler cancels what is left.
            }
          },
        });
      },
      message(peer, message) {
        void (peer.context as PeerState).session?.receive(message.text());
      },
      close(peer, details) {
        const state = peer.context as PeerState;
        services.log.info({ requestId: state.requestId, event: "agent_stream.close", code: details.code });
        void state.session?.close(details.code);
      },
      error(peer, error) {
        services.log.info({ requestId: (peer.context as PeerState).requestId, event: "agent_stream.socket_error", error: String(error) });
      },
    }),
  );
}
