import { SignJWT, decodeJwt, errors as joseErrors, jwtVerify } from "jose";

/**
 * Service tokens the bridge accepts from internal services (docs/interface.md 5: `SERVICE_JWT_SECRET`),
 * on every method whose auth lists the `service` credential kind (docs/service-tokens.md):
 * HS256, signed with SERVICE_JWT_SECRET, `aud` "bridge", `iss` one of the deployment's
 * services, `exp` required and at most an hour ahead.
 */
export const SERVICE_TOKEN_RULES = {
  audience: "bridge",
  /** The services of a deployment that call the bridge (the gateway itself in a split deployment). */
  issuers: ["orchestrator", "manager", "gateway"],
  /** Longest lifetime accepted (exp − now): a leaked token is good for an hour at most. */
  maxLifetimeSeconds: 3600,
  /** Clock skew tolerated between services. */
  clockToleranceSeconds: 30,
} as const;

export interface ServiceTokenClaims {
  /** `iss`: which service called. */
  issuer: string;
  /** `sub`, when the service names itself or the user it acts for. */
  subject?: string;
}

/** True when a JWT is addressed to the bridge (unverified: only decides which check applies). */
export function addressedToBridge(token: string): boolean {
  try {
    const { aud } = decodeJwt(token);
    return aud === SERVICE_TOKEN_RULES.audience || (Array.isArray(aud) && aud.includes(SERVICE_TOKEN_RULES.audience));
  } catch {
    return false;
  }
}

const keys = new Map<string, Uint8Array>();

/** The claims of a valid service token, or undefined (bad signature, issuer, audience, expiry). */
export async function verifyServiceToken(token: string, secret: string): Promise<ServiceTokenClaims | undefined> {
  let key = keys.get(secret);
  if (!key) keys.set(secret, (key = new TextEncoder().encode(secret)));
  try {
    const { payload } = await jwtVerify(token, key, {
      algorithms: ["HS256"],
      audience: SERVICE_TOKEN_RULES.audience,
      issuer: [...SERVICE_TOKEN_RULES.issuers],
      requiredClaims: ["exp", "iss", "aud"],
      clockTolerance: SERVICE_TOKEN_RULES.clockToleranceSeconds,
    });
    const now = Math.floor(Date.now() / 1000);
    if (payload.exp! - now > SERVICE_TOKEN_RULES.maxLifetimeSeconds + SERVICE_TOKEN_RULES.clockToleranceSeconds) return undefined;
    return { issuer: payload.iss!, ...(payload.sub ? { subject: payload.sub } : {}) };
  } catch (error) {
    if (error instanceof joseErrors.JOSEError) return undefined;
    throw error;
  }
}

/**
 * Signs a short-lived service token (HS256, SERVICE_JWT_SECRET) for a call this service makes
 * to an internal one — the billing proxy's calls to the manager (docs/billing.md): `iss`
 * "gateway", `aud` the service called, `sub` the user the call acts for.
 */
export function signServiceToken(
  secret: string,
  claims: { audience: string; subject: string; ttlSeconds: number; extra?: Record<string, string> },
): Promise<string> {
  let key = keys.get(secret);
  if (!key) keys.set(secret, (key = new TextEncoder().encode(secret)));
  return new SignJWT({ ...claims.extra })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuer("gateway")
    .setAudience(claims.audience)
    .setSubject(claims.subject)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + claims.ttlSeconds)
    .sign(key);
}
