import { RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import type { CorePorts } from "../ports.js";
import { callerTenant } from "./telemetry-ingest.js";

// One limiter per running service set (tests start several servers in one process).
type BudgetPorts = Pick<CorePorts, "config" | "store" | "users">;
const limiters = new WeakMap<BudgetPorts, RateLimiterAbstract>();

/**
 * The Gateway-wide budget per tenant (docs/quotas.md): GATEWAY_TENANT_RATE_LIMIT_RPM requests
 * per minute for all of a tenant's users and keys together, on top of each credential's own
 * limit, so a tenant cannot multiply its share by making keys. The tenant is the caller's own
 * (personal) tenant. Counters in `services.store.limiter`: shared by every instance on Redis.
 * 429 RATE_LIMITED with `Retry-After` in the Gateway envelope past it.
 */
export async function enforceTenantBudget(principal: Principal, services: BudgetPorts): Promise<void> {
  let limiter = limiters.get(services);
  const limit = services.config.GATEWAY_TENANT_RATE_LIMIT_RPM;
  if (!limiter) {
    limiter = services.store.limiter({ name: "gateway-tenant-rpm", points: limit, durationSeconds: 60 });
    limiters.set(services, limiter);
  }
  const tenantId = await callerTenant(services.users, principal.userId);
  try {
    await limiter.consume(tenantId, 1);
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error;
    const retryAfter = Math.max(1, Math.ceil(error.msBeforeNext / 1000));
    throw new ServiceError("RATE_LIMITED", `Tenant budget of ${limit} Gateway requests per minute reached (all its users and keys together); retry in ${retryAfter} s`, {
      headers: { "retry-after": String(retryAfter) },
      details: { scope: "tenant", tenantId, limit, windowSeconds: 60, retryAfterSeconds: retryAfter, variable: "GATEWAY_TENANT_RATE_LIMIT_RPM" },
    });
  }
}
