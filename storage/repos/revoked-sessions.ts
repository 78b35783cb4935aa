import type { Atomic } from "../atomic.js";

/** Revoked session token ids, each kept until the token would have expired anyway. */
export class RevokedSessionsRepo {
  readonly #atomic: Atomic;

  constructor(atomic: Atomic) {
    this.#atomic = atomic;
  }

  async isRevoked(jti: string): Promise<boolean> {
    return Boolean(await this.#atomic.get(`revoked:${jti}`));
  }

  async revoke(jti: string, ttlMs: number): Promise<void> {
    await this.#atomic.setIfAbsent(`revoked:${jti}`, "1", ttlMs);
  }
}
