import { decodeProtectedHeader, errors as joseErrors, jwtVerify } from "jose";
import type { OAuthConsentsRepo } from "../../storage/repos/oauth-consents.js";
import { verificationKeyObject, type OAuthKeyRing } from "./oauth-keys.js";

/** What an access token of the gateway's authorization server grants, once verified. */
export interface OAuthClaims {
  userId: string;
  /** The tenant the user chose on the consent page: the only one the token reaches. */
  tenantId: string;
  clientId: string;
  /** The consent (grant) it was issued under; revoking it refuses the token at once. */
  grantId: string;
  scopes: string[];
  /** The canonical URL it was issued for (RFC 8707). */
  audience: string;
}

/** The resource a request addresses and the issuer its tokens must come from (set by the MCP endpoint only). */
export interface OAuthAudience {
  /** The canonical URL of the endpoint (docs/mcp.md "Resource indicators"). */
  resource: string;
  issuer: string;
}

/** Claims the authorization server adds to its access tokens (bridge/oauth/provider.ts). */
export const TENANT_CLAIM = "tenant";
export const GRANT_CLAIM = "gid";

const AT_JWT = /^(application\/)?at\+jwt$/i;

/** How long a revoked grant is remembered (storage/repos/oauth-records.ts): longer than a refresh token of it can live. */
export function grantMemoryMs(config: { OAUTH_REFRESH_TOKEN_DAYS: number }): number {
  return (config.OAUTH_REFRESH_TOKEN_DAYS + 1) * 86_400_000;
}

/** True for an RFC 9068 access token (`typ: at+jwt`), which the service's session tokens never are. */
export function isAccessToken(token: string): boolean {
  try {
    const typ = decodeProtectedHeader(token).typ;
    return typeof typ === "string" && AT_JWT.test(typ);
  } catch {
    return false;
  }
}

/**
 * Verifies the authorization server's access tokens where they are used (docs/mcp.md "The
 * bridge as a resource server"): an ES256 signature by a published key, `typ` at+jwt, the
 * issuer, the audience equal to the canonical URL of the endpoint called, not expired, and the
 * consent it was issued under still there (a revoked consent refuses its tokens at once, on
 * every instance, though they are self-contained JWTs).
 */
export class AccessTokenVerifier {
  readonly #ring: OAuthKeyRing;
  readonly #consents: OAuthConsentsRepo;

  constructor(ring: OAuthKeyRing, consents: OAuthConsentsRepo) {
    this.#ring = ring;
    this.#consents = consents;
  }

  /** The token's claims, or undefined for any token that does not check out (the same 401 whatever the reason). */
  async verify(token: string, expected: OAuthAudience): Promise<OAuthClaims | undefined> {
    let kid: string | undefined;
    try {
      const header = decodeProtectedHeader(token);
      if (header.alg !== "ES256" || typeof header.kid !== "string") return undefined;
      kid = header.kid;
    } catch {
      return undefined;
    }
    const key = await this.#ring.verificationKey(kid);
    if (!key) return undefined;
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(token, await verificationKeyObject(key), {
        algorithms: ["ES256"],
        typ: "at+jwt",
        issuer: expected.issuer,
        audience: expected.resource,
        requiredClaims: ["exp", "iat", "sub", "client_id", "jti"],
        clockTolerance: 5,
      }));
    } catch (error) {
      if (error instanceof joseErrors.JOSEError) return undefined;
      throw error;
    }
    const sub = payload.sub;
    const clientId = payload.client_id;
    const tenantId = payload[TENANT_CLAIM];
    const grantId = payload[GRANT_CLAIM];
    if (typeof sub !== "string" || typeof clientId !== "string" || typeof tenantId !== "string" || typeof grantId !== "string")
      return undefined;
    const consent = await this.#consents.getConsent(grantId);
    if (
      !consent ||
      consent.userId !== sub ||
      consent.tenantId !== tenantId ||
      consent.clientId !== clientId ||
      consent.resource !== expected.resource
    )
      return undefined;
    const scopes = typeof payload.scope === "string" ? payload.scope.split(" ").filter(Boolean) : [];
    return { userId: sub, tenantId, clientId, grantId, scopes, audience: expected.resource };
  }
}
