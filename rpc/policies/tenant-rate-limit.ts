import { RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { Principal } from "../auth.js";
import type { CorePorts } from "../ports.js";
import { quotaReached } from "../quotas.js";
import type { Policy } from "./policy.js";
import { budgetOf } from "./rate-limit.js";

// One limiter per running service set (tests start several servers in one process).
const limiters = new WeakMap<CorePorts, RateLimiterAbstract>();

function limiterOf(ports: CorePorts): RateLimiterAbstract {
  let limiter = limiters.get(ports);
  if (!limiter) {
    limiter = ports.store.limiter({ name: "gateway-tenant-rpm", points: ports.config.GATEWAY_TENANT_RATE_LIMIT_RPM, durationSeconds: 60 });
    limiters.set(ports, limiter);
  }
  return limiter;
}

/** The `tenantId` (or `tenant_id`) a call's params name, if any. */
function namedTenant(params: unknown): string | undefined {
  if (typeof params !== "object" || params === null) return undefined;
  const { tenantId, tenant_id } = params as { tenantId?: unknown; tenant_id?: unknown };
  const named = typeof tenantId === "string" ? tenantId : typeof tenant_id === "string" ? tenant_id : undefined;
  return named && named.length <= 128 ? named : undefined;
}

/**
 * The tenant a call counts against (docs/quotas.md "The tenant's Gateway budget"): the one its
 * params name when the caller is a member of it (a membership record, or the creator of a
 * tenant whose members were never changed, as rpc/tenants/access.ts reads them), else the
 * caller's own personal tenant. A tenant the caller does not belong to is never charged: a
 * stranger naming it cannot spend its budget. The service credential has no tenant.
 */
export async function callTenant(ports: CorePorts, principal: Principal, params: unknown): Promise<string | undefined> {
  if (principal.kind === "service") return undefined;
  const user = await ports.users.recent(principal.userId);
  if (!user) return undefined;
  const named = namedTenant(params);
  if (!named || named === user.tenantId) return user.tenantId;
  if (await ports.members.get(named, user.id)) return named;
  const tenant = await ports.tenants.getTenant(named);
  if (tenant?.ownerId === user.id && !(await ports.members.seeded(named))) return named;
  return user.tenantId;
}

/**
 * GATEWAY_TENANT_RATE_LIMIT_RPM: one more Gateway API call of `tenantId` this minute, shared by
 * every instance (the limiter's counters live in Redis with STORAGE=redis). Past it: 429
 * RATE_LIMITED with Retry-After and the quota's details; the `X-RateLimit-*` headers keep
 * describing the caller's own budget (GATEWAY_API_RATE_LIMIT_RPM, docs/rate-limits.md).
 */
export async function enforceTenantRate(tenantId: string, ports: CorePorts): Promise<void> {
  const limit = ports.config.GATEWAY_TENANT_RATE_LIMIT_RPM;
  try {
    await limiterOf(ports).consume(tenantId, 1);
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error;
    const retryAfter = Math.max(1, Math.ceil(error.msBeforeNext / 1000));
    throw quotaReached("gateway_tenant_rpm", limit, error.consumedPoints, {
      code: "RATE_LIMITED",
      headers: { "retry-after": String(retryAfter) },
      extra: { tenantId, windowSeconds: 60, retryAfterSeconds: retryAfter, budget: "tenant" },
    });
  }
}

/**
 * The Gateway's budget per tenant, next to the per-credential one (`rateLimit`): every
 * authenticated call that counts against the Gateway's budget (the Gateway surface, `/rpc`,
 * agent-stream messages) also counts against its tenant's, all of the tenant's users and keys
 * together. It runs on the validated params (stage `params`), which may name the tenant.
 */
export const tenantRateLimit: Policy = {
  name: "tenantRateLimit",
  stage: "params",
  applies: (method, surface) => budgetOf(method, surface) === "gateway",
  async run(call, next) {
    if (call.principal) {
      const tenantId = await callTenant(call.ports, call.principal, call.params);
      if (tenantId) await enforceTenantRate(tenantId, call.ports);
    }
    return next();
  },
};
