import type { Config } from "../../rpc/config.js";
import { ServiceError } from "../../rpc/errors.js";

/** docs/interface.md 8 GATEWAY_CORS_ORIGINS: `*` or a comma-separated list of origins (a trailing slash is ignored). */
export function allowedOrigins(config: Pick<Config, "GATEWAY_CORS_ORIGINS">): readonly string[] {
  return config.GATEWAY_CORS_ORIGINS.split(",")
    .map((origin) => origin.trim().replace(/\/$/, ""))
    .filter(Boolean);
}

/** A request without `Origin` is not from a browser page and passes; a page's origin must be listed. */
export function originAllowed(origin: string | null, allowed: readonly string[]): boolean {
  if (!origin || allowed.includes("*")) return true;
  return allowed.includes(origin.replace(/\/$/, ""));
}

/**
 * 403 for a browser page outside the list. Nothing else checks `Origin` on a WebSocket
 * upgrade or an MCP request (the MCP specification's "Security Warning").
 */
export function assertOrigin(request: Request, allowed: readonly string[]): void {
  const origin = request.headers.get("origin");
  if (!originAllowed(origin, allowed)) throw new ServiceError("FORBIDDEN", `Origin ${origin} is not allowed`);
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Why a state-changing request carrying the console's cookie must be refused as cross-site,
 * or undefined when it may go on. SameSite=Lax alone is not enough: another port of the same
 * host (or a sibling subdomain) is the same *site*, so its form POSTs carry the cookie. A
 * browser sends `Origin` with every POST, PATCH and DELETE, and `Sec-Fetch-Site` with every
 * request: a write passes when its `Origin` is the service's own origin (the request's, or
 * PUBLIC_URL's) or one GATEWAY_CORS_ORIGINS lists by name (never `*`), and `Sec-Fetch-Site`
 * is absent, `same-origin` or `none` for the others. A request with neither header is not
 * from a browser (curl, a server) and cannot ride a user's cookie by accident.
 */
export function crossSiteWrite(request: Request, ownOrigins: readonly string[], listed: readonly string[]): string | undefined {
  if (SAFE_METHODS.has(request.method)) return undefined;
  const origin = request.headers.get("origin");
  const fetchSite = request.headers.get("sec-fetch-site");
  const named = (value: string) => ownOrigins.includes(value) || listed.includes(value);
  if (origin !== null) {
    return named(origin.replace(/\/$/, "")) ? undefined : `Cross-site request refused: Origin ${origin} is not this service`;
  }
  if (fetchSite !== null && fetchSite !== "same-origin" && fetchSite !== "none")
    return `Cross-site request refused (Sec-Fetch-Site: ${fetchSite})`;
  return undefined;
}
