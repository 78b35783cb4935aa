import { defineWebSocketHandler, type H3 } from "h3";
import { agentsStreamConnect } from "../../rpc/agents/methods.js";
import type { MethodResult } from "../../rpc/define.js";
import type { Dispatcher } from "../../rpc/dispatcher.js";
import { SURFACE_BASES } from "../../rpc/surfaces.js";
import { defineSocketUpgrade, type Admitted } from "../../facade/transport/ws-upgrade.js";
import { AgentStreamSession } from "./session.js";

/** `WS {gateway_base_url}/agents/stream` (docs/interface.md 4.4, messages per docs/interface.md 2.7). */
export const AGENT_STREAM_PATH = `${SURFACE_BASES.gateway}/agents/stream`;
/** The subprotocol this socket speaks; echoed back when offered (browsers require an echo). */
export const AGENT_STREAM_SUBPROTOCOL = "agent-stream.v1";

type PeerState = Partial<Admitted<MethodResult<typeof agentsStreamConnect>>> & { session?: AgentStreamSession };

/**
 * The agent stream: admitted in the upgrade by `agents.stream.connect` (401/403 refuse it
 * with the Gateway's JSON error), then one AgentStreamSession per socket, which maps its
 * messages onto registry methods.
 */
export function agentStreamTransport(app: H3, dispatcher: Dispatcher): void {
  const { log, config } = dispatcher.ports;
  const orchestratorMode = Boolean(config.ORCH_BASE_URL);
  // On shutdown every stream gets 1001 (going away), so clients reconnect to another instance.
  const open = new Set<{ close(code?: number, reason?: string): void }>();
  dispatcher.ports.onClose(() => {
    for (const peer of open) peer.close(1001, "server shutting down");
  });
  app.on(
    "GET",
    AGENT_STREAM_PATH,
    defineWebSocketHandler({
      upgrade: defineSocketUpgrade(dispatcher, {
        surface: "gateway",
        subprotocol: AGENT_STREAM_SUBPROTOCOL,
        event: "agent_stream",
        method: agentsStreamConnect,
        params: () => ({}),
      }),
      open(peer) {
        const state = peer.context as PeerState;
        if (!state.principal || !state.requestId || !state.presented) {
          void state.admitted?.place.release();
          return peer.close(1011, "no identity");
        }
        open.add(peer);
        state.admitted?.place.opened();
        state.session = new AgentStreamSession({
          dispatcher,
          principal: state.principal,
          presented: state.presented,
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
        open.delete(peer);
        // Its place among the user's and the tenant's sockets (docs/quotas.md) is free again.
        void state.admitted?.place.release();
        log.info({ requestId: state.requestId, event: "agent_stream.close", code: details.code });
        void state.session?.close(details.code);
      },
      error(peer, error) {
        log.info({ requestId: (peer.context as PeerState).requestId, event: "agent_stream.socket_error", error: String(error) });
      },
    }),
  );
}
