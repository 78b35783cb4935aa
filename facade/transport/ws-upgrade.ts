import { randomUUID } from "node:crypto";
import type { Presented, Principal } from "../../rpc/auth.js";
import type { AnyMethod, MethodResult } from "../../rpc/define.js";
import { callFacts, fromWire, type Dispatcher } from "../../rpc/dispatcher.js";
import { jsonResponse } from "./instrument.js";
import { assertOrigin, allowedOrigins } from "./origin.js";
import { renderError, SURFACES } from "../../rpc/surfaces.js";
import { presentedFor } from "./surfaces.js";

/** For clients that cannot set headers on a WebSocket (browsers): offer `bearer.<token>` next to the subprotocol. */
const BEARER_PROTOCOL = "bearer.";

export interface SocketGate<M extends AnyMethod> {
  /** The surface whose credentials and error envelope the upgrade uses. */
  surface: "gateway" | "bridge";
  /** The subprotocol the socket speaks; echoed back when offered (browsers require an echo). */
  subprotocol: string;
  /** Log event prefix, e.g. `vm` → `vm.upgrade`. */
  event: string;
  /** The internal method that authenticates and admits the socket (auth, policies, validation). */
  method: M;
  /** The gate method's params, read from the upgrade request (path and query), checked by the method. */
  params(request: Request): Record<string, unknown>;
}

/** What an accepted upgrade leaves in the peer's context. */
export interface Admitted<T> {
  requestId: string;
  principal: Principal;
  /** The credentials the upgrade carried: calls made over the socket present them again, so a revoked key stops working at once. */
  presented: Presented;
  admitted: T;
}

function offeredProtocols(request: Request): string[] {
  return (request.headers.get("sec-websocket-protocol") ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
}

/** docs/interface.md 5: `Authorization: Bearer`, `X-API-Key`, or the `bearer.<token>` subprotocol. */
function presentedOnUpgrade(surface: "gateway" | "bridge", request: Request): Presented {
  const presented = presentedFor(surface, request);
  if (presented.bearer || presented.apiKey) return presented;
  const viaProtocol = offeredProtocols(request).find((p) => p.startsWith(BEARER_PROTOCOL));
  return viaProtocol ? { bearer: viaProtocol.slice(BEARER_PROTOCOL.length) } : presented;
}

/**
 * The `upgrade` hook both sockets share: the Origin check, credentials from a header or the
 * bearer subprotocol, then the gate method through the dispatcher. A refusal is the surface's
 * JSON error with its status (401 with `WWW-Authenticate`, 403, 400, 429), before any socket opens.
 */
export function defineSocketUpgrade<M extends AnyMethod>(dispatcher: Dispatcher, gate: SocketGate<M>) {
  const { log, config } = dispatcher.ports;
  const origins = allowedOrigins(config);
  return async (request: Request) => {
    const requestId = randomUUID();
    let principal: Principal | undefined;
    // The upgrade's log line, with the gate call's fields (principal, outcome, duration).
    const logFields: Record<string, unknown> = {};
    // What the answer carries, refusal or not: the request id, and the rate limit's X-RateLimit-*.
    const responseHeaders = new Headers({ [SURFACES[gate.surface].requestIdHeader ?? "x-request-id"]: requestId });
    try {
      assertOrigin(request, origins);
      const presented = presentedOnUpgrade(gate.surface, request);
      const admitted = await dispatcher.call(
        gate.method,
        fromWire(() => gate.params(request)),
        callFacts({
          requestId,
          surface: gate.surface,
          transport: "socket",
          presented,
          signal: request.signal,
          responseHeaders,
          logFields,
          onAuthenticated: (who) => (principal = who),
        }),
      );
      log.info({ requestId, event: `${gate.event}.upgrade`, status: 101, ...logFields });
      const protocol = offeredProtocols(request).includes(gate.subprotocol) ? gate.subprotocol : undefined;
      const context: Admitted<MethodResult<M>> = { requestId, principal: principal!, presented, admitted };
      return {
        headers: Object.fromEntries(responseHeaders),
        ...(protocol ? { protocol } : {}),
        context: context as unknown as Record<string, unknown>,
      };
    } catch (error) {
      const rendered = renderError(gate.surface, error, requestId, log, responseHeaders);
      if (rendered.status !== 500) log.info({ requestId, event: `${gate.event}.upgrade`, status: rendered.status, ...logFields });
      if (rendered.status === 401) rendered.headers.set("www-authenticate", `Bearer realm="${gate.surface}"`);
      return jsonResponse(rendered.body, rendered.status, rendered.headers);
    }
  };
}
