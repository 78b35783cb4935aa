import { getCookie, type HTTPEvent } from "h3";
import type { Surface } from "../define.js";
import { describe, ServiceError, toServiceError } from "../errors.js";
import type { Logger } from "../log.js";
import type { Presented } from "../auth.js";

/** Base path of each surface on the one origin (DESIGN "Surfaces on one origin"). */
export const SURFACE_BASES: Record<Surface, string> = {
  platform: "/api/v1",
  // Console routes are `/api/api-keys…` and the console sign-in at `/api/session`.
  console: "/api",
  account: "/account/v1",
  gateway: "/gateway/v1",
  bridge: "/bridge",
};

/** Name of the console's HttpOnly session cookie. */
export const CONSOLE_COOKIE = "gw_console";

/** The surfaces' base paths, longest first, so `/api/v1` wins over `/api`. */
const LONGEST_BASE_FIRST = (Object.entries(SURFACE_BASES) as [Surface, string][]).sort((a, b) => b[1].length - a[1].length);

/** Which surface a path belongs to (longest base first), for 404s, error envelopes and the console's cross-site check. */
export function surfaceOfPath(pathname: string): Surface | undefined {
  for (const [surface, base] of LONGEST_BASE_FIRST) {
    if (pathname === base || pathname.startsWith(base + "/")) return surface;
  }
  return undefined;
}

/**
 * Reads the credential presentations a surface accepts (spec 5): Platform and Account take
 * a bearer key only; the console a cookie only; the Gateway, bridge and JSON-RPC a bearer
 * token or `X-API-Key`.
 */
export function presentedFor(surface: Surface | "rpc", request: Request): Presented {
  if (surface === "console") {
    const cookie = getCookie({ req: request } as HTTPEvent, CONSOLE_COOKIE);
    return cookie ? { cookie, viaConsole: true } : { viaConsole: true };
  }
  const presented: Presented = {};
  const authorization = request.headers.get("authorization");
  if (authorization) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match) presented.bearer = match[1];
    else presented.malformedAuthorization = true;
  }
  if (surface === "gateway" || surface === "bridge" || surface === "rpc") {
    const apiKey = request.headers.get("x-api-key")?.trim();
    if (apiKey) presented.apiKey = apiKey;
  }
  return presented;
}

/** OpenAI-style `type` for an error (spec 7.2). */
export function openAiType(error: ServiceError): string {
  if (error.type) return error.type;
  if (error.status === 401) return "authentication_error";
  if (error.status === 402) return "insufficient_quota";
  if (error.status === 403) return "permission_error";
  if (error.status === 404) return "not_found_error";
  if (error.status === 429) return "rate_limit_error";
  if (error.status >= 500) return "server_error";
  return "invalid_request_error";
}

/**
 * The one error rendered in each surface's envelope (spec 7). Relayed upstream errors keep
 * their body on every surface.
 */
export function errorBody(surface: Surface | "rpc", error: ServiceError, requestId: string): unknown {
  if (error.code === "UPSTREAM" && error.upstreamBody !== undefined) return error.upstreamBody;
  switch (surface) {
    case "platform":
      return { error: { message: error.message, type: openAiType(error), code: error.code.toLowerCase() } };
    case "account":
      // spec 7.1: auth refusals are flat {error, code}; request and quota errors use {error: {message, type}}.
      if (error.status === 401 || error.status === 403) return { error: error.message, code: error.code };
      return { error: { message: error.message, type: openAiType(error) } };
    case "console":
      return { error: { message: error.message } };
    case "rpc":
      return { jsonrpc: "2.0", id: null, error: { code: error.rpcCode, message: error.message, data: { code: error.code, status: error.status, requestId } } };
    default:
      return {
        error: {
          code: error.code,
          message: error.message,
          requestId,
          ...(error.details === undefined ? {} : { details: error.details }),
        },
      };
  }
}

export interface RenderedError {
  status: number;
  body: unknown;
  /** The error's own headers (`Retry-After`…) over the ones given. */
  headers: Headers;
  error: ServiceError;
}

/**
 * The one way any transport turns a thrown value into an answer: unexpected errors are
 * masked as INTERNAL and logged with the request id; the rest are rendered in the surface's
 * envelope. REST, `/rpc`, MCP, socket upgrades and stream error frames all come through here.
 */
export function renderError(surface: Surface | "rpc", thrown: unknown, requestId: string, log: Logger, headers?: Headers): RenderedError {
  let error = toServiceError(thrown);
  if (error.code === "INTERNAL") log.error({ requestId, error: describe(thrown) });
  if (surface === "platform") error = platformError(error);
  const out = new Headers(headers);
  for (const [name, value] of Object.entries(error.headers ?? {})) {
    // spec 7.2: Platform 429s carry no Retry-After, whoever set the limit; clients back off on their own.
    if (surface === "platform" && name.toLowerCase() === "retry-after") continue;
    out.set(name, value);
  }
  return { status: error.status, body: errorBody(surface, error, requestId), headers: out, error };
}

/**
 * spec 7.2 lists the Platform's statuses: a body that is not JSON (missing or other
 * Content-Type) is a malformed request, 400 `invalid_request_error` rather than 415; a model
 * that did not answer in time is 502 `server_error` rather than 504. Errors relayed from the
 * model gateway keep their own status.
 */
function platformError(error: ServiceError): ServiceError {
  const keep = { ...(error.headers ? { headers: error.headers } : {}), cause: error };
  if (error.code === "UNSUPPORTED_MEDIA_TYPE") return new ServiceError("BAD_REQUEST", error.message, { ...keep, type: "invalid_request_error" });
  if (error.code === "TIMEOUT") return new ServiceError("BAD_GATEWAY", error.message, { ...keep, type: "server_error" });
  return error;
}
