import type { Middleware } from "h3";
import type { Config } from "../rpc/config.js";
import { allowedOrigins } from "./transport/origin.js";
import { surfaceOfPath } from "../rpc/surfaces.js";

const ALLOW_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
const DEFAULT_ALLOW_HEADERS =
  "authorization, content-type, x-api-key, mcp-session-id, mcp-protocol-version, last-event-id, x-client-id, if-none-match, " +
  "anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access";
/**
 * Headers a browser client needs to read: request ids, rate limits, the MCP session, model
 * deprecation, what translation dropped, update-check ETags.
 */
const EXPOSE_HEADERS =
  "x-request-id, request-id, x-service-request-id, retry-after, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset, " +
  "mcp-session-id, mcp-protocol-version, www-authenticate, deprecation, x-model-warning, x-service-warning, etag";

/**
 * The CORS headers for one request, or undefined when the origin gets none.
 * docs/interface.md 8 GATEWAY_CORS_ORIGINS (`*` or a comma-separated list) applies to every surface,
 * except that the console, whose session is a cookie, never answers `*`: it allows only
 * origins listed explicitly, with credentials, so a wildcard can never expose a signed-in
 * console to any site.
 */
export function corsHeadersFor(origin: string, pathname: string, allowed: readonly string[]): Record<string, string> | undefined {
  const console = surfaceOfPath(pathname) === "console";
  const listed = allowed.includes(origin);
  if (console) {
    return listed ? { "access-control-allow-origin": origin, "access-control-allow-credentials": "true", vary: "Origin" } : undefined;
  }
  if (allowed.includes("*")) return { "access-control-allow-origin": "*" };
  return listed ? { "access-control-allow-origin": origin, vary: "Origin" } : undefined;
}

/**
 * CORS on every surface: preflights answered here (204), other responses get the headers added.
 * Written here rather than with h3's `handleCors`, which does not do the same job: it sends
 * `Access-Control-Allow-Credentials: true` to origins it refuses, and its headers land on
 * `event.res` where the responses this facade builds do not carry them.
 */
export function corsMiddleware(config: Pick<Config, "GATEWAY_CORS_ORIGINS">): Middleware {
  const allowed = allowedOrigins(config);
  return async (event, next) => {
    const request = event.req;
    const origin = request.headers.get("origin");
    if (!origin || request.headers.get("upgrade")) return next();
    const headers = corsHeadersFor(origin, new URL(request.url).pathname, allowed);
    if (request.method === "OPTIONS" && request.headers.get("access-control-request-method")) {
      const out = new Headers(headers);
      if (headers) {
        out.set("access-control-allow-methods", ALLOW_METHODS);
        out.set("access-control-allow-headers", request.headers.get("access-control-request-headers") ?? DEFAULT_ALLOW_HEADERS);
        out.set("access-control-max-age", "600");
      }
      if (!out.has("vary")) out.set("vary", "Origin");
      return new Response(null, { status: 204, headers: out });
    }
    const result = await next();
    if (!headers || !(result instanceof Response)) return result;
    const entries = { ...headers, "access-control-expose-headers": EXPOSE_HEADERS };
    try {
      for (const [name, value] of Object.entries(entries)) result.headers.set(name, value);
      return result;
    } catch {
      // Immutable headers (a relayed fetch response): copy into a new response.
      const copy = new Headers(result.headers);
      for (const [name, value] of Object.entries(entries)) copy.set(name, value);
      return new Response(result.body, { status: result.status, statusText: result.statusText, headers: copy });
    }
  };
}
