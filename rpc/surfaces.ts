import type { Dialect, Surface } from "./define.js";
import { describe, isServiceError, ServiceError, toServiceError } from "./errors.js";
import { storageOutage } from "../storage/outage.js";
import type { Logger } from "./log.js";

/** Where a call came in: one of the HTTP surfaces, or `POST /rpc` (JSON-RPC over the Gateway's credentials). */
export type CallSurface = Surface | "rpc";

/** A credential presentation a surface reads (docs/interface.md 5). */
export type Presentation = "bearer" | "apiKey" | "cookie";

/** The rate limits of the policy chain (rpc/policies/rate-limit.ts), by budget. */
export type RateLimitName = "bridge" | "gateway";

/** The error schemas of the OpenAPI document (facade/openapi.ts), one per envelope. */
export type ErrorSchemaName = "OpenAIError" | "FlatError" | "ConsoleError" | "GatewayError" | "AnthropicError";

/**
 * Everything that differs between the surfaces of the one origin, in one place: transports,
 * the dispatcher and the OpenAPI document read it instead of asking "is this the Platform?".
 */
export interface SurfaceProfile {
  /** Base path on the origin; a binding's path is below it. */
  base: string;
  /** OpenAPI tag name and description. */
  title: string;
  description: string;
  /** What the credential reader takes from a request (facade/transport/surfaces.ts `presentedFor`). */
  credentials: readonly Presentation[];
  /** The error envelope (docs/interface.md 7). */
  envelope(error: ServiceError, requestId: string): unknown;
  /** The surface's own reading of an error before it is rendered (the Platform's status list). */
  mapError?(error: ServiceError): ServiceError;
  /** The header echoing the request id on every answer; none on the Platform (docs/interface.md 4.2). */
  requestIdHeader?: string;
  /** `Retry-After` on a refusal that carries one (429, 503); never on the Platform (docs/interface.md 7.2). */
  retryAfter: boolean;
  /** `X-RateLimit-Limit`, `-Remaining`, `-Reset` on answers a rate limit counted (docs/rate-limits.md). */
  rateLimitHeaders: boolean;
  /**
   * The service's own headers beyond the contract: proxy hints on streams (`X-Accel-Buffering`),
   * a deprecated model's `Deprecation` and `X-Model-Warning`. None on the Platform (docs/interface.md 4.2).
   */
  serviceHeaders: boolean;
  /**
   * The budget every authenticated call through this surface counts against, unless its method
   * declares its own (`policies.rateLimit`): GATEWAY_API_RATE_LIMIT_RPM on the Gateway and `/rpc`.
   */
  rateLimit?: RateLimitName;
  /**
   * Whether a relayed upstream error body is answered as it is (the default), or rendered in
   * this envelope with the upstream's status and message (a dialect whose clients parse only
   * their own envelope).
   */
  relays?(upstreamBody: unknown): boolean;
  /** The OpenAPI error schema of the surface's operations, and of its 401/403 when those differ (`/rpc` has its own path, facade/openapi.ts). */
  openapi?: { errorSchema: ErrorSchemaName; authErrorSchema?: ErrorSchemaName };
}

/** OpenAI-style `type` for an error (docs/interface.md 7.2). */
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

/** The Gateway's and the bridge's envelope: `{error: {code, message, requestId, details?}}`. */
function gatewayEnvelope(error: ServiceError, requestId: string): unknown {
  return {
    error: {
      code: error.code,
      message: error.message,
      requestId,
      ...(error.details === undefined ? {} : { details: error.details }),
    },
  };
}

/**
 * docs/interface.md 7.2 lists the Platform's statuses: a model that did not answer in time is
 * 502 `server_error` rather than 504. Errors relayed from the model gateway keep their own status.
 * (A body that is not JSON is 400 on every surface: facade/transport/body.ts.)
 */
function platformError(error: ServiceError): ServiceError {
  const keep = { ...(error.headers ? { headers: error.headers } : {}), cause: error };
  if (error.code === "TIMEOUT") return new ServiceError("BAD_GATEWAY", error.message, { ...keep, type: "server_error" });
  return error;
}

/** The surface table (docs/architecture.md "Surfaces"). */
export const SURFACES: Readonly<Record<CallSurface, SurfaceProfile>> = {
  platform: {
    base: "/api/v1",
    title: "Platform API",
    description: "Metered chat completions and the model catalog for software serving third parties (platform keys `sk-…`).",
    credentials: ["bearer"],
    envelope: (error) => ({ error: { message: error.message, type: openAiType(error), code: error.code.toLowerCase() } }),
    mapError: platformError,
    // docs/interface.md 4.2: the Platform adds no header but X-Service-Request-Id (set by its methods).
    retryAfter: false,
    rateLimitHeaders: false,
    serviceHeaders: false,
    openapi: { errorSchema: "OpenAIError" },
  },
  console: {
    // Console routes are `/api/api-keys…` and the console sign-in at `/api/session`.
    base: "/api",
    title: "Console keys",
    description: "Platform key management for a signed-in browser session (cookie).",
    credentials: ["cookie"],
    envelope: (error) => ({ error: { message: error.message } }),
    requestIdHeader: "x-request-id",
    retryAfter: true,
    rateLimitHeaders: false,
    serviceHeaders: true,
    openapi: { errorSchema: "ConsoleError" },
  },
  account: {
    base: "/account/v1",
    title: "Account API",
    description: "Chat and the model catalog on a user's own account (personal keys).",
    credentials: ["bearer"],
    // docs/interface.md 7.1: auth refusals are flat {error, code}; request and quota errors use {error: {message, type}}.
    envelope: (error) =>
      error.status === 401 || error.status === 403
        ? { error: error.message, code: error.code }
        : { error: { message: error.message, type: openAiType(error) } },
    requestIdHeader: "x-request-id",
    retryAfter: true,
    rateLimitHeaders: false,
    serviceHeaders: true,
    openapi: { errorSchema: "OpenAIError", authErrorSchema: "FlatError" },
  },
  gateway: {
    base: "/gateway/v1",
    title: "Gateway API",
    description: "Auth, keys, agents, the tool catalog and routing, tenants and models (sessions or gateway keys).",
    credentials: ["bearer", "apiKey"],
    envelope: gatewayEnvelope,
    requestIdHeader: "x-request-id",
    retryAfter: true,
    rateLimitHeaders: true,
    serviceHeaders: true,
    rateLimit: "gateway",
    openapi: { errorSchema: "GatewayError" },
  },
  bridge: {
    base: "/bridge",
    title: "Tool bridge",
    description: "The tool bridge: tool execution on VMs, upstream MCP servers and health.",
    credentials: ["bearer", "apiKey"],
    envelope: gatewayEnvelope,
    requestIdHeader: "x-request-id",
    retryAfter: true,
    rateLimitHeaders: true,
    serviceHeaders: true,
    openapi: { errorSchema: "GatewayError" },
  },
  rpc: {
    base: "/rpc",
    title: "JSON-RPC",
    description: "Every operation above by its `x-jsonrpc-method` name, over JSON-RPC 2.0.",
    credentials: ["bearer", "apiKey"],
    envelope: (error, requestId) => ({
      jsonrpc: "2.0",
      id: null,
      error: { code: error.rpcCode, message: error.message, data: { code: error.code, status: error.status, requestId } },
    }),
    requestIdHeader: "x-request-id",
    retryAfter: true,
    // A batch mixes calls: their budgets reach the caller as each call's JSON-RPC error (-32029), not as headers.
    rateLimitHeaders: false,
    serviceHeaders: true,
    // The Gateway's credentials, so the Gateway's budget: no way around it by calling by name.
    rateLimit: "gateway",
  },
};

/** Anthropic's error `type` by status (docs/dialects.md "Errors"). */
const ANTHROPIC_TYPES: Readonly<Record<number, string>> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  504: "timeout_error",
  529: "overloaded_error",
};

/**
 * The Messages dialect's reading of an error (docs/dialects.md "Errors"): no model able to
 * answer now (503) is Anthropic's 529 `overloaded_error`, which its clients retry.
 */
function anthropicError(error: ServiceError): ServiceError {
  const keep = { ...(error.headers ? { headers: error.headers } : {}), cause: error };
  if (error.status === 503) return new ServiceError("UNAVAILABLE", error.message, { ...keep, status: 529 });
  return error;
}

function isAnthropicError(body: unknown): boolean {
  const error = (body as { type?: unknown; error?: { type?: unknown } } | null)?.error;
  return (body as { type?: unknown }).type === "error" && typeof error?.type === "string";
}

/**
 * The dialects a route may speak in place of its surface's own (rpc/define.ts `Dialect`): what
 * each changes of the surface's profile. Declared here once; the credential reader, the error
 * rendering (REST answers and stream error frames) and OpenAPI read it through `profileOf`.
 */
export const DIALECTS: Readonly<Record<Dialect, Partial<SurfaceProfile>>> = {
  anthropic: {
    // Anthropic's clients send `x-api-key` (the SDK's apiKey) or `Authorization: Bearer` (authToken).
    credentials: ["bearer", "apiKey"],
    envelope: (error) => ({
      type: "error",
      error: {
        type: ANTHROPIC_TYPES[error.status] ?? (error.status >= 500 ? "api_error" : "invalid_request_error"),
        message: error.message,
      },
    }),
    mapError: anthropicError,
    // Anthropic's own header, which its SDK reads as `_request_id` (the surface's `x-request-id` stays too).
    requestIdHeader: "request-id",
    // An Anthropic upstream's own error passes as it is; any other provider's is rendered in this envelope.
    relays: isAnthropicError,
    openapi: { errorSchema: "AnthropicError" },
  },
};

const PROFILES = new Map<string, SurfaceProfile>();

/** The profile a route answers with: its surface's, with its dialect's changes over it. */
export function profileOf(surface: CallSurface, dialect?: Dialect): SurfaceProfile {
  if (!dialect) return SURFACES[surface];
  const key = `${surface}\0${dialect}`;
  let profile = PROFILES.get(key);
  if (!profile) PROFILES.set(key, (profile = { ...SURFACES[surface], ...DIALECTS[dialect] }));
  return profile;
}

/** The HTTP surfaces (the table's rows but `/rpc`), in the table's order. */
export const HTTP_SURFACES = (Object.keys(SURFACES) as CallSurface[]).filter((surface): surface is Surface => surface !== "rpc");

/** Base path of each surface on the one origin (the table's `base`). */
export const SURFACE_BASES = Object.fromEntries(HTTP_SURFACES.map((surface) => [surface, SURFACES[surface].base])) as Readonly<
  Record<Surface, string>
>;

/** Name of the console's HttpOnly session cookie. */
export const CONSOLE_COOKIE = "gw_console";

/** The surfaces' base paths, longest first, so `/api/v1` wins over `/api`. */
const LONGEST_BASE_FIRST = HTTP_SURFACES.map((surface) => [surface, SURFACES[surface].base] as const).sort(
  (a, b) => b[1].length - a[1].length,
);

/** Which surface a path belongs to (longest base first), for 404s, error envelopes and the console's cross-site check. */
export function surfaceOfPath(pathname: string): Surface | undefined {
  for (const [surface, base] of LONGEST_BASE_FIRST) {
    if (pathname === base || pathname.startsWith(`${base}/`)) return surface;
  }
  return undefined;
}

/**
 * The one error rendered in each surface's envelope (docs/interface.md 7). Relayed upstream
 * errors keep their body on every surface.
 */
export function errorBody(surface: CallSurface, error: ServiceError, requestId: string, dialect?: Dialect): unknown {
  const profile = profileOf(surface, dialect);
  if (error.code === "UPSTREAM" && error.upstreamBody !== undefined && (profile.relays?.(error.upstreamBody) ?? true))
    return error.upstreamBody;
  return profile.envelope(error, requestId);
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
 * envelope with the headers its profile allows. REST, `/rpc`, MCP, socket upgrades and stream
 * error frames all come through here.
 */
export function renderError(
  surface: CallSurface,
  thrown: unknown,
  requestId: string,
  log: Logger,
  headers?: Headers,
  dialect?: Dialect,
): RenderedError {
  const profile = profileOf(surface, dialect);
  let error = toServiceError(thrown);
  if (error.code === "INTERNAL") log.error({ requestId, error: describe(thrown) });
  else if (!isServiceError(thrown)) log.error({ requestId, event: "storage.unavailable", error: storageOutage(thrown) });
  if (profile.mapError) error = profile.mapError(error);
  const out = new Headers(headers);
  for (const [name, value] of Object.entries(error.headers ?? {})) {
    const lower = name.toLowerCase();
    // docs/interface.md 7.2: Platform 429s carry no Retry-After, whoever set the limit; clients back off on their own.
    if (!profile.retryAfter && lower === "retry-after") continue;
    if (!profile.rateLimitHeaders && lower.startsWith("x-ratelimit-")) continue;
    out.set(name, value);
  }
  return { status: error.status, body: errorBody(surface, error, requestId, dialect), headers: out, error };
}
