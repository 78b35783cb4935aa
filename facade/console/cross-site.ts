import type { Middleware } from "h3";
import type { Config } from "../../rpc/config.js";
import { ServiceError } from "../../rpc/errors.js";
import { refuse, type Observers } from "../transport/instrument.js";
import { allowedOrigins, crossSiteWrite } from "../transport/origin.js";
import { surfaceOfPath } from "../../rpc/surfaces.js";

/**
 * 403 in the console's envelope for a state-changing console request sent by another site's
 * page (facade/transport/origin.ts `crossSiteWrite`), before the cookie is even read. The
 * console is the one surface whose credential a browser attaches by itself.
 */
export function crossSiteMiddleware(config: Pick<Config, "GATEWAY_CORS_ORIGINS" | "PUBLIC_URL">, observers: Observers): Middleware {
  const listed = allowedOrigins(config).filter((origin) => origin !== "*");
  const published = config.PUBLIC_URL ? [new URL(config.PUBLIC_URL).origin] : [];
  return (event, next) => {
    if (surfaceOfPath(event.url.pathname) !== "console") return next();
    const refusal = crossSiteWrite(event.req, [event.url.origin, ...published], listed);
    if (!refusal) return next();
    return refuse(event, "console", observers, new ServiceError("FORBIDDEN", refusal, { details: { reason: "cross_site" } }));
  };
}
