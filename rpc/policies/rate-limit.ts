import { RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import type { Services } from "../services.js";

// One limiter per running service set (tests start several servers in one process).
const limiters = new WeakMap<Services, RateLimiterAbstract>();

/** What a bridge request is counted against: the key itself, else the user (sessions), else the service. */
export function principalRateKey(principal: Principal): string {
  if (principal.key) return `key:${principal.key.id}`;
  return `${principal.kind}:${principal.userId}`;
}

/**
 * spec 8 GATEWAY_RATE_LIMIT_RPM: requests per minute per credential on the bridge (REST
 * methods on surface "bridge", the MCP endpoint, VM socket upgrades). Counters live in
 * `services.store.limiter`, so with STORAGE=redis every instance shares them.
 * Throws RATE_LIMITED (429) with `Retry-After` and `X-RateLimit-*` headers.
 */
export async function enforceBridgeRate(principalKey: string, services: Services): Promise<void> {
  let limiter = limiters.get(services);
  if (!limiter) {
    limiter = services.store.limiter({ name: "bridge-rpm", points: services.config.GATEWAY_RATE_LIMIT_RPM, durationSeconds: 60 });
    limiters.set(services, limiter);
  }
  try {
    await limiter.consume(principalKey, 1);
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error;
    const retryAfter = Math.max(1, Math.ceil(error.msBeforeNext / 1000));
    throw new ServiceError("RATE_LIMITED", `Rate limit of ${services.config.GATEWAY_RATE_LIMIT_RPM} requests per minute reached; retry in ${retryAfter} s`, {
      headers: {
        "retry-after": String(retryAfter),
        "x-ratelimit-limit": String(services.config.GATEWAY_RATE_LIMIT_RPM),
        "x-ratelimit-remaining": "0",
      },
      details: { limit: services.config.GATEWAY_RATE_LIMIT_RPM, windowSeconds: 60, retryAfterSeconds: retryAfter },
    });
  }
}
