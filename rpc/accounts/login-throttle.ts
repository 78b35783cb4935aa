import type { RateLimiterAbstract } from "rate-limiter-flexible";
import { ServiceError } from "../errors.js";
import type { AccountsDeps } from "./deps.js";
import { sha256Hex } from "../../storage/ids.js";
import { UsersRepo } from "../../storage/repos/users.js";

/**
 * Sign-in throttling (docs/security.md "Sign-in throttling"), the way Auth0's brute-force
 * protection and GitHub do it: failures are counted per email **and source address** together,
 * per email alone and per address alone, each in LOGIN_WINDOW_SECONDS, in
 * `services.store.limiter` (shared by every instance on Redis).
 * - one address past LOGIN_MAX_FAILURES on one email: 429 for that pair only — the attacker's
 *   address, not the owner's;
 * - one address past LOGIN_MAX_FAILURES_PER_ADDRESS across emails (credential stuffing): 429
 *   for that address;
 * - one email past LOGIN_MAX_FAILURES from any addresses: the slower path — every attempt on
 *   it waits LOGIN_SLOW_MS first, and the right password still signs in. Never a 429 from
 *   this count, so five wrong passwords from elsewhere never lock the owner out.
 */
interface Limiters {
  pair: RateLimiterAbstract;
  email: RateLimiterAbstract;
  address: RateLimiterAbstract;
}

type ThrottleDeps = Pick<AccountsDeps, "config" | "store">;

const byServices = new WeakMap<ThrottleDeps, Limiters>();

function limiters(services: ThrottleDeps): Limiters {
  let found = byServices.get(services);
  if (!found) {
    const { config, store } = services;
    const window = config.LOGIN_WINDOW_SECONDS;
    found = {
      pair: store.limiter({ name: "login-pair", points: config.LOGIN_MAX_FAILURES, durationSeconds: window }),
      email: store.limiter({ name: "login-email", points: config.LOGIN_MAX_FAILURES, durationSeconds: window }),
      address: store.limiter({ name: "login-address", points: config.LOGIN_MAX_FAILURES_PER_ADDRESS, durationSeconds: window }),
    };
    byServices.set(services, found);
  }
  return found;
}

export interface LoginThrottle {
  /** Counts a failed attempt on every key. */
  failed(): Promise<void>;
  /** The right password: this address's count on this email starts over. */
  succeeded(): Promise<void>;
}

function tooManyAttempts(msBeforeNext: number) {
  const seconds = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return new ServiceError("RATE_LIMITED", "Too many failed sign-in attempts from this address; try again later", {
    headers: { "Retry-After": String(seconds) },
  });
}

/** Refuses (429) an address past its limits, waits out the slower path for a targeted email, then lets the check run. */
export async function admitLogin(services: ThrottleDeps, email: string, ip: string): Promise<LoginThrottle> {
  const { config } = services;
  const { pair, email: perEmail, address } = limiters(services);
  const emailKey = sha256Hex(UsersRepo.normalizeEmail(email));
  const pairKey = `${emailKey}:${ip}`;
  const [pairState, addressState, emailState] = await Promise.all([pair.get(pairKey), address.get(ip), perEmail.get(emailKey)]);
  if (pairState && pairState.consumedPoints >= config.LOGIN_MAX_FAILURES) throw tooManyAttempts(pairState.msBeforeNext);
  if (addressState && addressState.consumedPoints >= config.LOGIN_MAX_FAILURES_PER_ADDRESS) throw tooManyAttempts(addressState.msBeforeNext);
  if (emailState && emailState.consumedPoints >= config.LOGIN_MAX_FAILURES && config.LOGIN_SLOW_MS > 0) {
    await new Promise((resolve) => setTimeout(resolve, config.LOGIN_SLOW_MS));
  }
  // A consume past the points rejects (with the state); the count is what matters here.
  const count = (limiter: RateLimiterAbstract, key: string) => limiter.consume(key).then(
    () => undefined,
    (rejection: unknown) => {
      if (rejection instanceof Error) throw rejection;
    },
  );
  return {
    failed: () => Promise.all([count(pair, pairKey), count(perEmail, emailKey), count(address, ip)]).then(() => undefined),
    succeeded: () => pair.delete(pairKey).then(() => undefined),
  };
}
