import { H3 } from "h3";
import type { Dispatcher } from "../rpc/dispatcher.js";
import { ServiceError } from "../rpc/errors.js";
import type { Transport } from "./transport/mount.js";
import { mountDocs } from "./docs.js";
import { mountConsole } from "./console/route.js";
import { crossSiteMiddleware } from "./console/cross-site.js";
import { corsMiddleware } from "./cors.js";
import { hostCheckMiddleware } from "./host-check.js";
import { strictPathsMiddleware } from "./strict-paths.js";
import { instrument, jsonResponse } from "./transport/instrument.js";
import { mountJsonRpc } from "./jsonrpc.js";
import { buildOpenApi } from "./openapi.js";
import { mountRest, type MountedRoute } from "./rest.js";
import { SURFACE_BASES, surfaceOfPath } from "../rpc/surfaces.js";

/**
 * The h3 app: REST bindings generated from the registry, `POST /rpc`, OpenAPI and docs, any
 * extra transports, and 404/405 in the envelope of the surface the path belongs to.
 */
export function buildApp(dispatcher: Dispatcher, transports: readonly Transport[] = []): H3 {
  const app = new H3({ silent: true });
  app.use(hostCheckMiddleware(dispatcher.ports.config, dispatcher.ports));
  app.use(strictPathsMiddleware(dispatcher.ports));
  app.use(corsMiddleware(dispatcher.ports.config));
  app.use(crossSiteMiddleware(dispatcher.ports.config, dispatcher.ports));
  const routes: MountedRoute[] = mountRest(app, dispatcher);
  mountJsonRpc(app, dispatcher);
  let openapi: { origin: string; document: unknown } | undefined;
  const documentFor = (origin: string) => {
    if (openapi?.origin !== origin) openapi = { origin, document: buildOpenApi(dispatcher.registry, origin) };
    return openapi.document;
  };
  mountDocs(app, documentFor, dispatcher.ports.config.PUBLIC_URL);
  mountConsole(app);
  for (const transport of transports) transport(app, dispatcher);

  app.on("GET", "/", () =>
    jsonResponse(
      {
        service: "chat-agent-tool-gateway",
        surfaces: { ...SURFACE_BASES, consoleKeys: "/api/api-keys", jsonRpc: "/rpc" },
        openapi: "/openapi.json",
        docs: "/docs",
        console: "/console",
      },
      200,
      new Headers(),
    ),
  );

  app.all("/**", (event) => {
    const pathname = new URL(event.req.url).pathname;
    const surface = surfaceOfPath(pathname) ?? "gateway";
    return instrument(surface, dispatcher.ports, async (_event, scope) => {
      const allowed = [...new Set(routes.filter((route) => route.pattern.test(pathname)).map((route) => route.method))];
      if (allowed.length > 0) {
        scope.responseHeaders.set("allow", allowed.join(", "));
        throw new ServiceError("METHOD_NOT_ALLOWED", `Method ${event.req.method} is not allowed here; use ${allowed.join(", ")}`);
      }
      throw new ServiceError("NOT_FOUND", `No route for ${event.req.method} ${pathname}`);
    })(event);
  });
  return app;
}
