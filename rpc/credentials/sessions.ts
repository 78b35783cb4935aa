import { randomUUID } from "node:crypto";
import { SignJWT, jwtVerify, errors as joseErrors } from "jose";
import type { RevokedSessionsRepo } from "../../storage/repos/revoked-sessions.js";

export interface SessionClaims {
  userId: string;
  jti: string;
  expiresAt: number;
}

const ISSUER = "gateway";
const AUDIENCE = "gateway-session";

/** HS256 session tokens with expiry and audience, revocable by id until they expire. */
export class SessionTokens {
  readonly #key: Uint8Array;
  readonly #ttlSeconds: number;
  readonly #revoked: RevokedSessionsRepo;

  constructor(secret: string, ttlSeconds: number, revoked: RevokedSessionsRepo) {
    this.#key = new TextEncoder().encode(secret);
    this.#ttlSeconds = ttlSeconds;
    this.#revoked = revoked;
  }

  async issue(userId: string): Promise<{ token: string; expiresAt: Date }> {
    const now = Math.floor(Date.now() / 1000);
    const exp = now + this.#ttlSeconds;
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setSubject(userId)
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt(now)
      .setExpirationTime(exp)
      .setJti(randomUUID())
      .sign(this.#key);
    return { token, expiresAt: new Date(exp * 1000) };
  }

  /** The claims of a valid, unexpired, unrevoked token; undefined otherwise. */
  async verify(token: string): Promise<SessionClaims | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.#key, {
        algorithms: ["HS256"],
        issuer: ISSUER,
        audience: AUDIENCE,
        currentDate: new Date(),
      });
      if (!payload.sub || !payload.jti || !payload.exp) return undefined;
      if (await this.#revoked.isRevoked(payload.jti)) return undefined;
      return { userId: payload.sub, jti: payload.jti, expiresAt: payload.exp * 1000 };
    } catch (error) {
      if (error instanceof joseErrors.JOSEError) return undefined;
      throw error;
    }
  }

  async revoke(claims: SessionClaims): Promise<void> {
    const ttl = claims.expiresAt - Date.now();
    if (ttl > 0) await this.#revoked.revoke(claims.jti, ttl + 1000);
  }
}

export function looksLikeJwt(token: string): boolean {
  return /^[\w-]+\.[\w-]+\.[\w-]+$/.test(token);
}
