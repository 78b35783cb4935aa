import { RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import type { CorePorts } from "../ports.js";

// One limiter per running service set (tests start several servers in one process).
const limiters = new WeakMap<CorePorts, RateLimiterAbstract>();

/** What a bridge request is counted against: the key itself, else the user (sessions), else the service. */
export function principalRateKey(principal: Principal): string {
  if (principal.key) return `key:${principal.key.id}`;
  return `${principal.kind}:${principal.userId}`;
}

/**
 * spec 8 GATEWAY_RATE_LIMIT_RPM: requests per minute per credential on the bridge (REST
 * methods on surface "bridge", the MCP endpoint, VM socket upgrades). Counters live in
 * `services.store.limiter`, so with STORAGE=redis every instance shares them.
 * Throws RATE_LIMITED (429) with `Retry-After` and `X-RateLimit-*` headers; an admitted call
 * gets `X-RateLimit-Limit`, `-Remaining` and `-Reset` (seconds until the window resets) in
 * `headers`, the de facto names most HTTP APIs use.
 */
export async function enforceBridgeRate(principalKey: string, services: CorePorts, headers?: Headers): Promise<void> {
  let limiter = limiters.get(services);
  if (!limiter) {
    limiter = services.store.limiter({ name: "bridge-rpm", points: services.config.GATEWAY_RATE_LIMIT_RPM, durationSeconds: 60 });
    limiters.set(services, limiter);
  }
  try {
    const admitted = await limiter.consume(principalKey, 1);
    headers?.set("x-ratelimit-limit", String(services.config.GATEWAY_RATE_LIMIT_RPM));
    headers?.set("x-ratelimit-remaining", String(Math.max(0, admitted.remainingPoints)));
    headers?.set("x-ratelimit-reset", String(Math.max(0, Math.ceil(admitted.msBeforeNext / 1000))));
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error;
    const retryAfter = Math.max(1, Math.ceil(error.msBeforeNext / 1000));
    throw new ServiceError("RATE_LIMITED", `Rate limit of ${services.config.GATEWAY_RATE_LIMIT_RPM} requests per minute reached; retry in ${retryAfter} s`, {
      headers: {
        "retry-after": String(retryAfter),
        "x-ratelimit-limit": String(services.config.GATEWAY_RATE_LIMIT_RPM),
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": String(retryAfter),
      },
      details: { limit: services.config.GATEWAY_RATE_LIMIT_RPM, windowSeconds: 60, retryAfterSeconds: retryAfter },
    });
  }
}
