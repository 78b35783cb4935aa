import { randomUUID } from "node:crypto";
import { defineWebSocketHandler, type H3 } from "h3";
import { authenticate, type Presented, type Principal } from "../../rpc/auth.js";
import type { Dispatcher } from "../../rpc/dispatcher.js";
import { ServiceError, toServiceError } from "../../rpc/errors.js";
import type { Services } from "../../rpc/services.js";
import { enforceBridgeRate, principalRateKey } from "../../rpc/policies/rate-limit.js";
import { jsonResponse } from "../../rpc/transport/instrument.js";
import { SURFACE_BASES, errorBody, presentedFor } from "../../rpc/transport/surfaces.js";
import { describe } from "../../rpc/dispatcher.js";
import type { VmConnection, VmIdentity } from "./connection.js";
import { VM_ID } from "./protocol.js";
import type { Transport } from "../../rpc/transport/mount.js";
import type { ToolBridge } from "../tool-bridge.js";

/** The subprotocol a VM agent speaks; echoed back when offered (browsers require an echo). */
export const VM_SUBPROTOCOL = "vm-agent.v1";
/** For clients that cannot set headers: offer `bearer.<token>` next to `vm-agent.v1`. */
const BEARER_PROTOCOL = "bearer.";

export const VM_SOCKET_PATH = `${SURFACE_BASES.bridge}/agents/:agentId/ws`;

interface PeerState {
  identity?: VmIdentity;
  conn?: VmConnection;
}

function offeredProtocols(request: Request): string[] {
  return (request.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim()).filter(Boolean);
}

/** spec 5 (bridge): `Authorization: Bearer`, `X-API-Key`, or the `bearer.<token>` subprotocol. */
function presentedOnUpgrade(request: Request): Presented {
  const presented = presentedFor("bridge", request);
  if (presented.bearer || presented.apiKey) return presented;
  const viaProtocol = offeredProtocols(request).find((p) => p.startsWith(BEARER_PROTOCOL));
  return viaProtocol ? { bearer: viaProtocol.slice(BEARER_PROTOCOL.length) } : presented;
}

/** The tenant a VM serves: the caller's own unless it names a tenant it owns (403 otherwise). */
async function tenantOf(principal: Principal, requested: string | null, services: Services): Promise<string> {
  if (principal.kind === "service") return requested || "internal";
  const user = await services.users.get(principal.userId);
  if (!user) throw new ServiceError("UNAUTHORIZED", "Invalid or expired API key");
  if (!requested || requested === user.tenantId) return user.tenantId;
  const tenant = await services.tenants.getTenant(requested);
  if (!tenant || tenant.ownerId !== user.id) throw new ServiceError("FORBIDDEN", `You cannot connect a VM for tenant ${requested}`);
  return tenant.id;
}

async function admit(request: Request, services: Services): Promise<VmIdentity> {
  const url = new URL(request.url);
  const principal = (await authenticate(presentedOnUpgrade(request), { kinds: ["session", "gateway_key", "service"] }, services))!;
  // spec 8: upgrades count against the same per-credential budget as other bridge requests.
  await enforceBridgeRate(principalRateKey(principal), services);
  const agentId = decodeURIComponent(url.pathname.split("/").at(-2) ?? "");
  const vmId = url.searchParams.get("vmId");
  if (!vmId) throw new ServiceError("BAD_REQUEST", "Query parameter vmId is required");
  if (!VM_ID.test(vmId)) throw new ServiceError("BAD_REQUEST", "vmId: letters, digits, _ . - (1-64, starting with a letter or digit)");
  if (!VM_ID.test(agentId)) throw new ServiceError("BAD_REQUEST", "agent_id: letters, digits, _ . - (1-64, starting with a letter or digit)");
  const tenantId = await tenantOf(principal, url.searchParams.get("tenantId"), services);
  return { vmId, agentId, tenantId, userId: principal.userId };
}

/**
 * `WS /bridge/agents/:agentId/ws?vmId=&tenantId=` (spec 4.5): authenticated and validated in
 * the upgrade (401/403/400/429 refuse it with the bridge's JSON error), then handed to the hub.
 */
export function vmSocketTransport(bridge: ToolBridge): Transport {
  return (app, dispatcher) => mountVmSocket(app, dispatcher, bridge);
}

function mountVmSocket(app: H3, dispatcher: Dispatcher, bridge: ToolBridge): void {
  const services = dispatcher.services;
  app.on(
    "GET",
    VM_SOCKET_PATH,
    defineWebSocketHandler({
      async upgrade(request) {
        const requestId = randomUUID();
        try {
          const identity = await admit(request, services);
          await bridge.vms.admit(identity);
          services.log.info({ requestId, event: "vm.upgrade", status: 101, vmId: identity.vmId, principal: { userId: identity.userId } });
          const protocol = offeredProtocols(request).includes(VM_SUBPROTOCOL) ? VM_SUBPROTOCOL : undefined;
          return { headers: { "x-request-id": requestId }, ...(protocol ? { protocol } : {}), context: { identity } satisfies PeerState };
        } catch (error) {
          const serviceError = toServiceError(error);
          if (serviceError.code === "INTERNAL") services.log.error({ requestId, error: describe(error) });
          else services.log.info({ requestId, event: "vm.upgrade", status: serviceError.status });
          const headers = new Headers({ "x-request-id": requestId, ...serviceError.headers });
          if (serviceError.status === 401) headers.set("www-authenticate", 'Bearer realm="bridge"');
          return jsonResponse(errorBody("bridge", serviceError, requestId), serviceError.status, headers);
        }
      },
      open(peer) {
        const state = peer.context as PeerState;
        if (!state.identity) return peer.close(1011, "no identity");
        state.conn = bridge.vms.attach(state.identity, peer);
      },
      message(peer, message) {
        (peer.context as PeerState).conn?.receive(message.text());
      },
      close(peer, details) {
        const conn = (peer.context as PeerState).conn;
        if (conn) bridge.vms.detach(conn, details.code);
      },
      error(peer, error) {
        services.log.info({ event: "vm.socket_error", vmId: (peer.context as PeerState).identity?.vmId, error: String(error) });
      },
    }),
  );
}
