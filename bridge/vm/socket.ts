import { defineWebSocketHandler, type H3 } from "h3";
import type { MethodResult } from "../../rpc/define.js";
import type { Dispatcher } from "../../rpc/dispatcher.js";
import { bridgeVmsConnect } from "../../rpc/tools/vm-methods.js";
import type { Transport } from "../../facade/transport/mount.js";
import { SURFACE_BASES } from "../../rpc/surfaces.js";
import type { ToolBridge } from "../tool-bridge.js";
import { defineSocketUpgrade, type Admitted } from "../../facade/transport/ws-upgrade.js";
import type { VmConnection } from "./connection.js";

/** The subprotocol a VM agent speaks; echoed back when offered (browsers require an echo). */
export const VM_SUBPROTOCOL = "vm-agent.v1";

export const VM_SOCKET_PATH = `${SURFACE_BASES.bridge}/agents/:agentId/ws`;

type PeerState = Partial<Admitted<MethodResult<typeof bridgeVmsConnect>>> & { conn?: VmConnection };

/**
 * `WS /bridge/agents/:agentId/ws?vmId=&tenantId=` (docs/interface.md 4.5): admitted in the upgrade by the
 * `bridge.vms.connect` method (401/403/400/429 refuse it with the bridge's JSON error), then
 * handed to the hub, which speaks JSON-RPC with the VM.
 */
export function vmSocketTransport(bridge: ToolBridge): Transport {
  return (app, dispatcher) => mountVmSocket(app, dispatcher, bridge);
}

function mountVmSocket(app: H3, dispatcher: Dispatcher, bridge: ToolBridge): void {
  const { log } = dispatcher.ports;
  app.on(
    "GET",
    VM_SOCKET_PATH,
    defineWebSocketHandler({
      upgrade: defineSocketUpgrade(dispatcher, {
        surface: "bridge",
        subprotocol: VM_SUBPROTOCOL,
        event: "vm",
        method: bridgeVmsConnect,
        params(request) {
          const url = new URL(request.url);
          return {
            agentId: decodeURIComponent(url.pathname.split("/").at(-2) ?? ""),
            vmId: url.searchParams.get("vmId") ?? undefined,
            tenantId: url.searchParams.get("tenantId") ?? undefined,
          };
        },
      }),
      open(peer) {
        const state = peer.context as PeerState;
        if (!state.admitted) return peer.close(1011, "no identity");
        state.conn = bridge.vms.attach(state.admitted, peer);
      },
      message(peer, message) {
        (peer.context as PeerState).conn?.receive(message.text());
      },
      close(peer, details) {
        const conn = (peer.context as PeerState).conn;
        if (conn) bridge.vms.detach(conn, details.code);
      },
      error(peer, error) {
        const state = peer.context as PeerState;
        log.info({ requestId: state.requestId, event: "vm.socket_error", vmId: state.admitted?.vmId, error: String(error) });
      },
    }),
  );
}
