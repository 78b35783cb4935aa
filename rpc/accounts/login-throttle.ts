import { RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import { pause } from "../time.js";
import { ServiceError } from "../errors.js";
import type { Config } from "../config.js";
import type { Store } from "../../storage/store.js";
import { sha256Hex } from "../../storage/ids.js";

/**
 * Failed sign-ins, counted so that an attacker cannot lock the owner out (docs/security.md
 * "Sign-in throttling"), the way GitHub and Auth0 do it:
 * - per email **and** source address: LOGIN_MAX_FAILURES per LOGIN_WINDOW_SECONDS;
 * - per email across addresses: ten times that (a spread-out guess at one account).
 * Past either, attempts take the slow path: each waits LOGIN_SLOW_MS, one at a time per email on
 * an instance, then the password is checked. The right password signs in; a wrong one gets 429
 * with Retry-After. So the owner, from any address, is slowed but never refused, and a guesser
 * gets one guess per LOGIN_SLOW_MS per email and instance.
 */
export class LoginThrottle {
  readonly #pair: RateLimiterAbstract;
  readonly #email: RateLimiterAbstract;
  readonly #config: Pick<Config, "LOGIN_MAX_FAILURES" | "LOGIN_SLOW_MS">;
  /** Emails with a slow-path check running on this instance. */
  readonly #slowInFlight = new Set<string>();

  constructor(store: Pick<Store, "limiter">, config: Pick<Config, "LOGIN_MAX_FAILURES" | "LOGIN_WINDOW_SECONDS" | "LOGIN_SLOW_MS">) {
    this.#config = config;
    this.#pair = store.limiter({ name: "login", points: config.LOGIN_MAX_FAILURES, durationSeconds: config.LOGIN_WINDOW_SECONDS });
    this.#email = store.limiter({
      name: "login-email",
      points: config.LOGIN_MAX_FAILURES * 10,
      durationSeconds: config.LOGIN_WINDOW_SECONDS,
    });
  }

  /**
   * Runs `verify` (true when the password is right) under the throttle for this email and
   * source address; resolves when it signs in, throws 401 or 429 otherwise.
   */
  async check(
    normalizedEmail: string,
    ip: string,
    verify: () => Promise<boolean>,
    options: { signal?: AbortSignal; logFields?: Record<string, unknown> } = {},
  ): Promise<void> {
    const { signal, logFields } = options;
    const emailKey = sha256Hex(normalizedEmail);
    const pairKey = sha256Hex(`${normalizedEmail}\n${ip}`);
    const [pair, email] = await Promise.all([this.#pair.get(pairKey), this.#email.get(emailKey)]);
    const exhausted = (state: RateLimiterRes | null, points: number) => state !== null && state.consumedPoints >= points;
    const slow = exhausted(pair, this.#pair.points) || exhausted(email, this.#email.points);
    if (!slow) {
      if (await verify()) return void (await this.#pair.delete(pairKey));
      await this.#fail(pairKey, emailKey);
      throw invalidLogin();
    }
    const retryAfterMs = Math.max(pair?.msBeforeNext ?? 0, email?.msBeforeNext ?? 0, this.#config.LOGIN_SLOW_MS);
    // The request's log line says which path it took (docs/security.md "Sign-in throttling").
    if (this.#slowInFlight.has(emailKey)) {
      if (logFields) logFields.signIn = "busy";
      throw tooManyAttempts(this.#config.LOGIN_SLOW_MS);
    }
    if (logFields) logFields.signIn = "slowed";
    this.#slowInFlight.add(emailKey);
    try {
      await pause(this.#config.LOGIN_SLOW_MS, signal);
      if (await verify()) return void (await this.#pair.delete(pairKey));
    } finally {
      this.#slowInFlight.delete(emailKey);
    }
    await this.#fail(pairKey, emailKey);
    throw tooManyAttempts(retryAfterMs);
  }

  async #fail(pairKey: string, emailKey: string): Promise<void> {
    const spend = (limiter: RateLimiterAbstract, key: string) =>
      limiter.consume(key).catch((rejection) => {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
      });
    await Promise.all([spend(this.#pair, pairKey), spend(this.#email, emailKey)]);
  }
}

const invalidLogin = () => new ServiceError("UNAUTHORIZED", "Invalid email or password", { details: { reason: "credentials" } });

function tooManyAttempts(msBeforeNext: number) {
  const seconds = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return new ServiceError("RATE_LIMITED", "Too many failed sign-in attempts; try again later", {
    headers: { "Retry-After": String(seconds) },
  });
}
