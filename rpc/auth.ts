import { timingSafeEqual } from "node:crypto";
import { ServiceError, type ErrorCode } from "./errors.js";
import type { CorePorts } from "./ports.js";
import { parseKey } from "./credentials/api-keys.js";
import { looksLikeJwt, type SessionClaims } from "./credentials/sessions.js";
import { addressedToBridge, verifyServiceToken } from "./credentials/service-tokens.js";
import { isAccessToken, type OAuthAudience } from "./credentials/oauth-tokens.js";
import type { KeyKind, KeyRecord } from "../storage/repos/keys.js";
import { sha256Hex, nowIso } from "../storage/ids.js";

/**
 * How a caller proved who it is. Each kind is read from one presentation only (docs/interface.md 5).
 * `service` is PLATFORM_SERVICE_KEY, or a service token signed with SERVICE_JWT_SECRET, presented
 * by an internal service (bridge methods that list it only; docs/service-tokens.md). `oauth` is
 * an access token of the gateway's authorization server, taken by the MCP endpoints only, for
 * the endpoint it was issued for (docs/mcp.md "The bridge as a resource server").
 */
export type CredentialKind = "session" | "console" | "gateway_key" | "platform_key" | "account_key" | "service" | "oauth";

export type AuthSpec =
  | "public"
  | {
      kinds: readonly CredentialKind[];
      /** Every scope listed is required (sessions and gateway keys hold all scopes). */
      scopes?: readonly string[];
      /** Error code for a missing scope; FORBIDDEN unless the surface names another (docs/interface.md 7.1). */
      scopeError?: ErrorCode;
      /**
       * A route for signed-in users only: a valid API key gets 403 with this message rather
       * than a 401 that would send its holder looking for a typo.
       */
      keyRefusal?: string;
      /**
       * Operators only (docs/architecture.md "Ownership": they publish releases and edit the model registry):
       * the service credential (PLATFORM_SERVICE_KEY), or a user the admin command flagged
       * with `grant-operator`. Anyone else authenticated gets 403 FORBIDDEN.
       */
      operator?: boolean;
    };

/** The credentials a request carried, as the transport found them; nothing is trusted yet. */
export interface Presented {
  /** `Authorization: Bearer <token>` */
  bearer?: string;
  /** `X-API-Key: <key>` (Gateway and bridge) */
  apiKey?: string;
  /** The console's session cookie. */
  cookie?: string;
  /** The request came through the console surface, which reads the cookie and nothing else. */
  viaConsole?: boolean;
  /** `Authorization` was present but not a bearer token. */
  malformedAuthorization?: boolean;
  /**
   * The endpoint the request addresses, as an OAuth resource: set by the MCP endpoint only, so an
   * access token of the authorization server is taken there, for the endpoint it was issued for,
   * and refused everywhere else like a forged one (docs/mcp.md "The bridge as a resource server").
   */
  oauthAudience?: OAuthAudience;
}

/** Who is calling, once a credential checked out. */
export interface Principal {
  kind: CredentialKind;
  userId: string;
  /** Platform keys: the workspace whose credits pay. */
  workspaceId?: string;
  scopes: readonly string[];
  key?: KeyRecord;
  session?: SessionClaims;
  /**
   * The one tenant whose tools the caller reaches, when its credential is bound to one: an OAuth
   * access token, for the tenant chosen on the consent page (docs/mcp.md "Sign-in and consent").
   */
  tenantId?: string;
  /** An OAuth access token's client and the consent (grant) it was issued under. */
  oauth?: { clientId: string; grantId: string };
}

const KIND_OF_KEY: Record<KeyKind, CredentialKind> = {
  gateway: "gateway_key",
  platform: "platform_key",
  account: "account_key",
};

/** 401 with why, so each surface can word it (docs/interface.md 7.2 has two fixed messages). */
export function unauthorized(reason: "missing" | "invalid"): ServiceError {
  return new ServiceError("UNAUTHORIZED", reason === "missing" ? "Missing or invalid API key" : "Invalid or expired API key", {
    details: { reason },
  });
}

// lastUsedAt is written at most once a minute per key: a write per request would make every
// call a storage round trip.
const TOUCH_INTERVAL_MS = 60_000;

/**
 * Narrows a request to a principal before any handler runs: a credential of an allowed kind,
 * valid, unrevoked and unexpired (else 401), holding the scopes (else 403).
 */
export async function authenticate(presented: Presented, spec: AuthSpec, services: CorePorts): Promise<Principal | undefined> {
  if (spec === "public") return undefined;
  const allowed = new Set(spec.kinds);
  const principal = await resolve(presented, allowed, services, spec.keyRefusal);
  requireScopes(principal, spec);
  return principal;
}

/**
 * Holds a principal a transport already authenticated within the same request (an MCP
 * request admitted by its gate) to another method's auth: its credential kind must be one the
 * method takes (else 401, as for a credential of another kind) and it must hold the scopes.
 */
export function admitPrincipal(principal: Principal, spec: AuthSpec): Principal | undefined {
  if (spec === "public") return principal;
  if (!spec.kinds.includes(principal.kind)) throw unauthorized("missing");
  requireScopes(principal, spec);
  return principal;
}

function requireScopes(principal: Principal, spec: Exclude<AuthSpec, "public">): void {
  if (spec.scopes?.length && !principal.scopes.includes("*")) {
    const missing = spec.scopes.filter((scope) => !principal.scopes.includes(scope));
    if (missing.length) {
      throw new ServiceError(spec.scopeError ?? "FORBIDDEN", `This credential lacks the required scope: ${missing.join(", ")}`, {
        details: { required: spec.scopes },
      });
    }
  }
}

/** 403 unless the method is open to everyone authenticated or the caller is an operator (docs/architecture.md "Ownership"). */
export async function requireOperator(principal: Principal | undefined, spec: AuthSpec, services: CorePorts): Promise<void> {
  if (spec === "public" || !spec.operator || !principal) return;
  if (!(await isOperator(principal, services))) {
    throw new ServiceError("FORBIDDEN", "Only operators may do this", { details: { reason: "operator_required" } });
  }
}

/** The service credential, or a user flagged operator (`npm run admin -- grant-operator`). */
export async function isOperator(principal: Principal, services: CorePorts): Promise<boolean> {
  if (principal.kind === "service") return true;
  const user = await services.users.get(principal.userId);
  return user?.operator === true;
}

async function resolve(presented: Presented, allowed: Set<CredentialKind>, services: CorePorts, keyRefusal?: string): Promise<Principal> {
  if (allowed.has("console") && presented.cookie) {
    const claims = await services.sessions.verify(presented.cookie);
    if (!claims) throw new ServiceError("UNAUTHORIZED", "Session expired or signed out; sign in again", { details: { reason: "invalid" } });
    return sessionPrincipal("console", claims, services);
  }
  // docs/interface.md 7.3: the console answers "no session", not an API-key message (also for a method
  // that other surfaces reach with a token, when it is called through the console).
  if (presented.viaConsole || (allowed.size === 1 && allowed.has("console"))) {
    throw new ServiceError("UNAUTHORIZED", "Not signed in", { details: { reason: "missing" } });
  }
  const token = presented.bearer ?? presented.apiKey;
  if (!token) throw unauthorized("missing");
  // docs/interface.md 5: internal services reach the bridge with PLATFORM_SERVICE_KEY; only methods listing "service" take it.
  if (allowed.has("service") && isServiceKey(token, services.config.PLATFORM_SERVICE_KEY)) return SERVICE_PRINCIPAL;
  // docs/interface.md 5: SERVICE_JWT_SECRET signs the service tokens the bridge accepts (aud "bridge").
  if (allowed.has("service") && presented.bearer && looksLikeJwt(presented.bearer) && addressedToBridge(presented.bearer)) {
    const secret = services.config.SERVICE_JWT_SECRET;
    if (!secret || !(await verifyServiceToken(presented.bearer, secret))) throw unauthorized("invalid");
    return SERVICE_PRINCIPAL;
  }

  // docs/mcp.md "The bridge as a resource server": an access token (typ at+jwt) is taken only
  // where it is allowed and addressed; anywhere else it is refused as invalid, like a forged one.
  if (presented.bearer && looksLikeJwt(presented.bearer) && isAccessToken(presented.bearer)) {
    if (!allowed.has("oauth") || !presented.oauthAudience) throw unauthorized("invalid");
    const claims = await services.accessTokens.verify(presented.bearer, presented.oauthAudience);
    if (!claims) throw unauthorized("invalid");
    const user = await services.users.get(claims.userId);
    if (!user) throw unauthorized("invalid");
    return {
      kind: "oauth",
      userId: user.id,
      scopes: claims.scopes,
      tenantId: claims.tenantId,
      oauth: { clientId: claims.clientId, grantId: claims.grantId },
    };
  }

  if (presented.bearer && looksLikeJwt(presented.bearer)) {
    if (!allowed.has("session")) throw unauthorized("missing");
    const claims = await services.sessions.verify(presented.bearer);
    if (!claims) throw unauthorized("invalid");
    return sessionPrincipal("session", claims, services);
  }

  const keyKind = parseKey(services.keyPrefixes, token);
  if (!keyKind) {
    // A prefix this endpoint takes with a bad checksum is a typo of a real key; anything else
    // (another surface's prefix included) is no key for this endpoint (docs/interface.md 7.2).
    const known = (Object.entries(services.keyPrefixes) as [KeyKind, string][]).some(
      ([prefixKind, prefix]) => allowed.has(KIND_OF_KEY[prefixKind]) && token.startsWith(prefix),
    );
    throw unauthorized(known ? "invalid" : "missing");
  }
  const kind = KIND_OF_KEY[keyKind];
  if (!allowed.has(kind) && !keyRefusal) throw unauthorized("missing");
  const record = await services.keys.findByHash(sha256Hex(token));
  if (!record || record.kind !== keyKind) throw unauthorized("invalid");
  if (record.expiresAt && Date.parse(record.expiresAt) <= Date.now()) throw unauthorized("invalid");
  if (!allowed.has(kind)) throw new ServiceError("FORBIDDEN", keyRefusal!, { details: { reason: "session_required" } });
  // An archived workspace's platform keys are refused by a policy of the chain (rpc/policies/archived-workspace.ts).
  if (!record.lastUsedAt || Date.now() - Date.parse(record.lastUsedAt) >= TOUCH_INTERVAL_MS) {
    record.lastUsedAt = nowIso();
    await services.keys.update(record);
  }
  return {
    kind,
    userId: record.userId,
    workspaceId: keyKind === "platform" ? record.owner : undefined,
    scopes: keyKind === "gateway" ? ["*"] : record.scopes,
    key: record,
  };
}

async function sessionPrincipal(kind: CredentialKind, claims: SessionClaims, services: CorePorts): Promise<Principal> {
  const user = await services.users.get(claims.userId);
  if (!user) throw unauthorized("invalid");
  return { kind, userId: user.id, workspaceId: user.workspaceId, scopes: ["*"], session: claims };
}

/** The principal of PLATFORM_SERVICE_KEY: no user; `userId` names the service for logs and rate limits. */
export const SERVICE_PRINCIPAL: Principal = Object.freeze({ kind: "service", userId: "service", scopes: ["*"] }) as Principal;

/**
 * The local administrator: `npm run admin`, which holds the storage and secrets already and
 * dispatches operator methods in-process as this principal (`CallFacts.authenticated`). An
 * operator like the service credential (`isOperator`), with no user; `userId` names it in log
 * lines and in the records it makes. No request can present it: it is never resolved from a
 * credential.
 */
export const ADMIN_PRINCIPAL: Principal = Object.freeze({ kind: "service", userId: "admin", scopes: ["*"] }) as Principal;

/**
 * The auth of an operation only the admin command offers (an `internal` method, no binding):
 * the service kind that `ADMIN_PRINCIPAL` carries, and operators only.
 */
export const LOCAL_ADMIN = { kinds: ["service"], operator: true } as const satisfies AuthSpec;

/** Constant-time comparison with the configured service key (hashed first so lengths match). */
export function isServiceKey(token: string, configured: string | undefined): boolean {
  if (!configured) return false;
  return timingSafeEqual(Buffer.from(sha256Hex(token), "hex"), Buffer.from(sha256Hex(configured), "hex"));
}

/** The principal of an authenticated method (its auth spec guarantees one). */
export function principalOf(ctx: { principal: Principal | undefined }): Principal {
  if (!ctx.principal) throw unauthorized("missing");
  return ctx.principal;
}
