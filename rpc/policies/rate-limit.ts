import { RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { Principal } from "../auth.js";
import type { Config } from "../config.js";
import type { AnyMethod } from "../define.js";
import { ServiceError } from "../errors.js";
import type { CorePorts } from "../ports.js";
import { SURFACES, type CallSurface, type RateLimitName } from "../surfaces.js";
import type { Policy } from "./policy.js";

/** The per-credential request budgets (docs/rate-limits.md): their limiter name and config variable. */
const BUDGETS: Record<RateLimitName, { limiter: string; rpm: (config: Config) => number; what: string }> = {
  // docs/interface.md 8 GATEWAY_RATE_LIMIT_RPM: the bridge's tool methods, the MCP endpoint, VM socket upgrades.
  bridge: { limiter: "bridge-rpm", rpm: (config) => config.GATEWAY_RATE_LIMIT_RPM, what: "requests" },
  // GATEWAY_API_RATE_LIMIT_RPM: every authenticated call on the Gateway surface and /rpc.
  gateway: { limiter: "gateway-rpm", rpm: (config) => config.GATEWAY_API_RATE_LIMIT_RPM, what: "Gateway API requests" },
};

// One limiter per budget and running service set (tests start several servers in one process).
const limiters = new WeakMap<CorePorts, Map<RateLimitName, RateLimiterAbstract>>();

function limiterOf(budget: RateLimitName, ports: CorePorts): RateLimiterAbstract {
  let byBudget = limiters.get(ports);
  if (!byBudget) limiters.set(ports, (byBudget = new Map()));
  let limiter = byBudget.get(budget);
  if (!limiter) {
    limiter = ports.store.limiter({ name: BUDGETS[budget].limiter, points: BUDGETS[budget].rpm(ports.config), durationSeconds: 60 });
    byBudget.set(budget, limiter);
  }
  return limiter;
}

/** What a request is counted against: the key itself, else the user (sessions), else the service. */
export function principalRateKey(principal: Principal): string {
  if (principal.key) return `key:${principal.key.id}`;
  return `${principal.kind}:${principal.userId}`;
}

/** The budget a call counts against: the method's own (`policies.rateLimit`), else its surface's (rpc/surfaces.ts). */
export function budgetOf(method: AnyMethod, surface: CallSurface): RateLimitName | undefined {
  return method.policies?.rateLimit ?? SURFACES[surface].rateLimit;
}

/**
 * Counts one request against a per-credential budget of requests per minute. Counters live in
 * `ports.store.limiter`, so with STORAGE=redis every instance shares them. Past the budget:
 * RATE_LIMITED (429) with `Retry-After` and `X-RateLimit-*`; an admitted call gets
 * `X-RateLimit-Limit`, `-Remaining` and `-Reset` (seconds until the window resets) in
 * `headers`, the de facto names most HTTP APIs use (docs/rate-limits.md).
 */
export async function enforceRate(budget: RateLimitName, principalKey: string, ports: CorePorts, headers?: Headers): Promise<void> {
  const limit = BUDGETS[budget].rpm(ports.config);
  try {
    const admitted = await limiterOf(budget, ports).consume(principalKey, 1);
    headers?.set("x-ratelimit-limit", String(limit));
    headers?.set("x-ratelimit-remaining", String(Math.max(0, admitted.remainingPoints)));
    headers?.set("x-ratelimit-reset", String(Math.max(0, Math.ceil(admitted.msBeforeNext / 1000))));
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error;
    const retryAfter = Math.max(1, Math.ceil(error.msBeforeNext / 1000));
    throw new ServiceError("RATE_LIMITED", `Rate limit of ${limit} ${BUDGETS[budget].what} per minute reached; retry in ${retryAfter} s`, {
      headers: {
        "retry-after": String(retryAfter),
        "x-ratelimit-limit": String(limit),
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": String(retryAfter),
      },
      details: { limit, windowSeconds: 60, retryAfterSeconds: retryAfter, budget },
    });
  }
}

/**
 * The request budget of the call's credential: the bridge's (declared by the bridge's methods,
 * `policies: {rateLimit: "bridge"}`) or the Gateway's (every call through the Gateway surface
 * or `/rpc` whose method declares no other). A public method's anonymous caller is not
 * counted (sign-in has its own throttle). The headers go only where the surface's profile
 * allows them (none on the Platform, docs/interface.md 4.2).
 */
export const rateLimit: Policy = {
  name: "rateLimit",
  stage: "call",
  applies: (method, surface) => budgetOf(method, surface) !== undefined,
  async run(call, next) {
    const { principal, facts, method } = call;
    if (principal) {
      const headers = SURFACES[facts.surface].rateLimitHeaders ? facts.responseHeaders : undefined;
      await enforceRate(budgetOf(method, facts.surface)!, principalRateKey(principal), call.ports, headers);
    }
    return next();
  },
};
