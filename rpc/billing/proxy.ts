import { Readable } from "node:stream";
import * as v from "valibot";
import { RawReply, type HttpVerb, type RawRequest } from "../define.js";
import type { Principal } from "../auth.js";
import { pause } from "../time.js";
import { ServiceError } from "../errors.js";
import { signServiceToken } from "../credentials/service-tokens.js";
import { tenantOrPersonal } from "../tenants/access.js";
import { RawRequestInput } from "../validate.js";
import { isUpstreamTimeout, upstreamRequest, type UpstreamResponse } from "../outbound/upstream.js";
import { billingDomain, type BillingContext } from "./deps.js";

/** RFC 9110 7.6.1: headers for one connection only, never forwarded; plus what a proxy sets itself. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
]);
/** The caller's own credentials: the manager gets the caller's identity and a service token instead. */
const CREDENTIALS = new Set(["authorization", "x-api-key", "cookie"]);
/**
 * Identity-looking headers a caller could try to pass as someone else's (docs/billing.md
 * "Proxy"): the gateway's own, the common `X-User-Id`/`X-Tenant-Id` forms a manager might read,
 * and what a proxy in front of the manager would set about the client (`X-Forwarded-*`,
 * `Forwarded`, `X-Real-IP`). Never forwarded; the gateway sets its `X-Gateway-*` ones itself.
 */
const IDENTITY = new Set([
  "x-request-id",
  "x-user-id",
  "x-tenant-id",
  "x-workspace-id",
  "x-account-id",
  "x-org-id",
  "x-organization-id",
  "forwarded",
  "x-real-ip",
  "x-client-ip",
  "true-client-ip",
  "cf-connecting-ip",
]);
const IDENTITY_PREFIXES = ["x-gateway-", "x-forwarded-"];
/** Answer headers relayed besides the status and body. */
const RELAYED = ["content-type", "cache-control", "etag", "last-modified", "content-disposition", "location", "retry-after"];
/** RFC 9110 9.2.2: methods a retry cannot repeat the effect of. */
const IDEMPOTENT = new Set<HttpVerb>(["GET", "PUT", "DELETE"]);
const TOKEN_TTL_SECONDS = 60;

/** `/billing/{path}`: `..` or `.` segments are refused (400), never forwarded. */
export const ProxyPath = v.pipe(
  v.string("path must be a string"),
  v.minLength(1, "path is required"),
  v.maxLength(2048),
  v.check((path) => !path.split("/").some((segment) => segment === ".." || segment === "."), "path must not contain '.' or '..' segments"),
  v.check((path) => !/[\\\u0000-\u001f]/.test(path), "path must not contain backslashes or control characters"),
);

function forwardedHeaders(request: RawRequest): Record<string, string> {
  const connectionListed = new Set((request.headers.connection ?? "").split(",").map((name) => name.trim().toLowerCase()));
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    const lower = name.toLowerCase();
    if (
      HOP_BY_HOP.has(lower) ||
      CREDENTIALS.has(lower) ||
      connectionListed.has(lower) ||
      IDENTITY.has(lower) ||
      IDENTITY_PREFIXES.some((prefix) => lower.startsWith(prefix))
    )
      continue;
    headers[lower] = value;
  }
  return headers;
}

/** The `tenantId` query parameter (the last one when repeated), or undefined. */
function queriedTenant(search: string): string | undefined {
  const values = new URLSearchParams(search).getAll("tenantId");
  const last = values.at(-1);
  if (values.length > 1 && values.some((value) => value !== last))
    throw new ServiceError("VALIDATION_FAILED", "tenantId is given more than once with different values", {
      details: { field: "tenantId" },
    });
  return last === "" ? undefined : last;
}

/**
 * Forwards one call to MANAGER_BASE_URL (docs/billing.md "Proxy"): the query and body as they
 * came, the caller's identity as headers and a service token, never the caller's credential;
 * the answer streamed back with its status. GATEWAY_TIMEOUT_SECONDS per attempt (504),
 * GATEWAY_MAX_RETRIES for idempotent methods on a failed connection or a 502/503/504.
 */
export async function proxyToManager(ctx: BillingContext<Principal>, path: string, request: RawRequest): Promise<RawReply> {
  const { config } = ctx.deps;
  if (!config.MANAGER_BASE_URL)
    throw new ServiceError("UNAVAILABLE", "The billing service is not configured", {
      operatorNote: { unsetVariable: "MANAGER_BASE_URL" },
    });
  if (!config.SERVICE_JWT_SECRET)
    throw new ServiceError("UNAVAILABLE", "The billing service is not configured", {
      operatorNote: { unsetVariable: "SERVICE_JWT_SECRET" },
    });
  // A `tenantId` in the query names the tenant the call is about: it must be one of the
  // caller's (404 like a missing one otherwise), and it is the tenant the manager is told.
  const tenant = await tenantOrPersonal(ctx.deps, ctx.principal, queriedTenant(request.search), "viewer");
  const user = await ctx.deps.users.get(ctx.principal.userId);
  const workspaceId = ctx.principal.workspaceId ?? user?.workspaceId ?? "";
  const base = config.MANAGER_BASE_URL.replace(/\/+$/, "");
  const target = `${base}/${path.split("/").map(encodeURIComponent).join("/")}${request.search}`;
  const headers = forwardedHeaders(request);
  headers["x-gateway-user-id"] = ctx.principal.userId;
  headers["x-gateway-tenant-id"] = tenant.id;
  headers["x-gateway-workspace-id"] = workspaceId;
  headers["x-request-id"] = ctx.requestId;
  // Only a well-formed W3C trace context goes on (the transport checked it), like to providers.
  if (ctx.traceparent) headers.traceparent = ctx.traceparent;
  else delete headers.traceparent;
  const token = await signServiceToken(config.SERVICE_JWT_SECRET, {
    audience: "manager",
    subject: ctx.principal.userId,
    ttlSeconds: TOKEN_TTL_SECONDS,
    extra: { tenantId: tenant.id },
  });
  headers.authorization = `Bearer ${token}`;
  const attempts = 1 + (IDEMPOTENT.has(request.method) ? config.GATEWAY_MAX_RETRIES : 0);
  const timeoutMs = config.GATEWAY_TIMEOUT_SECONDS * 1000;
  let lastError: ServiceError | undefined;
  for (let attempt = 0; attempt < attempts; attempt += 1) {
    if (attempt > 0) await pause(100 * 2 ** (attempt - 1), ctx.signal);
    if (ctx.signal.aborted) break;
    let response: UpstreamResponse;
    try {
      // The shared upstream pool (rpc/outbound/upstream.ts): the limit covers the answer's
      // headers and each gap in its body; the caller going away closes the connection.
      response = await upstreamRequest(target, { method: request.method, headers, body: request.body, signal: ctx.signal, timeoutMs });
    } catch (error) {
      if (isUpstreamTimeout(error))
        throw new ServiceError("TIMEOUT", `The billing service did not answer within ${config.GATEWAY_TIMEOUT_SECONDS} s`, {
          cause: error,
        });
      lastError = new ServiceError("BAD_GATEWAY", "The billing service is unreachable", { cause: error });
      continue;
    }
    if (attempt + 1 < attempts && [502, 503, 504].includes(response.statusCode)) {
      await response.body.dump().catch(() => undefined);
      continue;
    }
    const relayed = new Headers();
    for (const name of RELAYED) {
      const value = response.headers[name];
      if (value !== undefined) relayed.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    return new RawReply(response.statusCode, relayed, Readable.toWeb(response.body) as ReadableStream<Uint8Array>);
  }
  throw lastError ?? new ServiceError("BAD_GATEWAY", "The billing service is unreachable");
}

/** The billing proxy (docs/interface.md 4.4 `/billing/{path}`, docs/billing.md). */
export const billingProxyMethods = [
  billingDomain.method({
    name: "billing.proxy",
    summary:
      "Pass-through to the billing manager (MANAGER_BASE_URL/{path}) with the query and body; the caller's identity " +
      "goes as X-Gateway-User-Id, X-Gateway-Tenant-Id, X-Gateway-Workspace-Id and a short-lived service token, never " +
      "the caller's credential. 503 when MANAGER_BASE_URL is unset, 502 when the manager is down, 504 past " +
      "GATEWAY_TIMEOUT_SECONDS.",
    input: v.object({ path: ProxyPath, request: RawRequestInput }),
    auth: { kinds: ["session", "gateway_key"] },
    output: v.pipe(v.unknown(), v.description("The manager's answer: its status, content type and body, relayed as they came")),
    errors: { VALIDATION_FAILED: {}, BAD_GATEWAY: {}, UNAVAILABLE: {}, TIMEOUT: {}, PAYLOAD_TOO_LARGE: {}, NOT_FOUND: {}, FORBIDDEN: {} },
    http: (["GET", "POST", "PUT", "PATCH", "DELETE"] as const).map((method) => ({
      surface: "gateway" as const,
      method,
      path: "/billing/**:path",
      raw: true,
    })),
    handler: (params, ctx) => proxyToManager(ctx, params.path, params.request),
  }),
];
