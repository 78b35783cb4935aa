import type { Config } from "../config.js";
import { ServiceError } from "../errors.js";

/** spec 8 GATEWAY_CORS_ORIGINS: `*` or a comma-separated list of origins (a trailing slash is ignored). */
export function allowedOrigins(config: Pick<Config, "GATEWAY_CORS_ORIGINS">): readonly string[] {
  return config.GATEWAY_CORS_ORIGINS.split(",").map((origin) => origin.trim().replace(/\/$/, "")).filter(Boolean);
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
