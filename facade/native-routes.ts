import type { IncomingMessage, ServerResponse } from "node:http";
import { sendNodeResponse } from "srvx/node";
import type { AnyMethod, HttpBinding } from "../rpc/define.js";
import type { Dispatcher } from "../rpc/dispatcher.js";
import { hostCheck } from "./host-check.js";
import { fullPath, restJsonBody, serveRest } from "./rest.js";
import { errorResponse, instrumentRequest, type RequestView } from "./transport/instrument.js";
import { presentedIn } from "./transport/surfaces.js";

export interface NativeRoute {
  method: AnyMethod;
  binding: HttpBinding;
}

/**
 * A request's headers as the Fetch API reads them: every occurrence of a name joined with ", "
 * (Node's `headers` keeps only the first of a repeated `Authorization`, where a web `Request`
 * joins them, and the credential reader then refuses the pair as malformed). Made on first use.
 */
function headerReader(req: IncomingMessage): (name: string) => string | undefined {
  let byName: Map<string, string> | undefined;
  return (name) => {
    if (!byName) {
      byName = new Map();
      const raw = req.rawHeaders;
      for (let i = 0; i < raw.length; i += 2) {
        const key = raw[i]!.toLowerCase();
        const seen = byName.get(key);
        byName.set(key, seen === undefined ? raw[i + 1]! : `${seen}, ${raw[i + 1]}`);
      }
    }
    return byName.get(name);
  };
}

/**
 * The REST routes the Node server answers itself, without h3 (docs/performance.md "Requests
 * served without h3"): a `POST` to a route without path parameters outside the console (chat
 * completions, the Responses and Messages dialects, tool execution, and every create route of
 * that kind), as plain as nearly every API client sends it — the exact path, no query, a declared `Content-Length` within GATEWAY_MAX_PAYLOAD_BYTES,
 * no `Origin` (so no CORS), and a `Host` the service answers. The same declaration runs the
 * same way as through h3 (facade/rest.ts): instrumentRequest (request id, log line, metrics,
 * span), the dispatcher (policies, validation, handler), the surface's or dialect's error
 * envelope, and replyOf for the answer, written by srvx's own sender. Any other request, on
 * these paths too, goes to the h3 app, whose middleware answers what this does not look at
 * (preflights, strict paths, refused hosts, chunked or oversized bodies).
 *
 * `take` is the Node request listener's front half: true when it took the request. `routeOf`
 * says which method a request would be served by here, if any (undefined: the h3 app).
 */
export function nativeRoutes(dispatcher: Dispatcher): {
  take(req: IncomingMessage, res: ServerResponse): boolean;
  routeOf(req: Pick<IncomingMessage, "method" | "url" | "headers">): NativeRoute | undefined;
} {
  const { config } = dispatcher.ports;
  const limit = config.GATEWAY_MAX_PAYLOAD_BYTES;
  const servesHost = hostCheck(config);
  const routes = new Map<string, NativeRoute>();
  for (const method of Object.values(dispatcher.registry)) {
    if (method.internal) continue;
    for (const binding of method.http) {
      if (binding.method !== "POST" || binding.raw || binding.path.includes(":") || binding.surface === "console") continue;
      routes.set(fullPath(binding), { method, binding });
    }
  }
  const routeOf = (req: Pick<IncomingMessage, "method" | "url" | "headers">) => {
    if (req.method !== "POST") return undefined;
    const route = routes.get(req.url ?? "");
    if (!route) return undefined;
    const { headers } = req;
    if (headers.origin !== undefined || headers.upgrade !== undefined || headers["transfer-encoding"] !== undefined) return undefined;
    const declared = declaredLength(headers["content-length"]);
    if (declared === undefined || declared > limit) return undefined;
    if (!servesHost(headers.host)) return undefined;
    return route;
  };
  return {
    routeOf,
    take(req, res) {
      const route = routeOf(req);
      if (!route) return false;
      // routeOf checked the declared length: a plain decimal within the limit.
      serve(dispatcher, route, req, res, Number(req.headers["content-length"])).catch(() => res.destroy());
      return true;
    },
  };
}

function declaredLength(header: string | undefined): number | undefined {
  if (header === undefined || !/^\d{1,15}$/.test(header)) return undefined;
  return Number(header);
}

async function serve(dispatcher: Dispatcher, route: NativeRoute, req: IncomingMessage, res: ServerResponse, declared: number) {
  const { method, binding } = route;
  const header = headerReader(req);
  const view: RequestView = { method: "POST", path: req.url!, header, ip: req.socket.remoteAddress, node: { req, res } };
  const response = await instrumentRequest(
    binding.surface,
    dispatcher.ports,
    view,
    // The same call as through h3 (facade/rest.ts serveRest): no query, no path parameters here.
    (scope) =>
      serveRest(
        {
          header,
          presented: presentedIn(binding.surface, header, binding.dialect),
          json: () => restJsonBody({ node: req, declared }),
          query: () => ({}),
        },
        method,
        binding,
        dispatcher,
        scope,
      ),
    (error, scope) => errorResponse(binding.surface, error, scope.requestId, dispatcher.ports.log, scope.responseHeaders, binding.dialect),
    binding.dialect ? { dialect: binding.dialect } : {},
  );
  await sendNodeResponse(res, response);
}
