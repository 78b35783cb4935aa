import { RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import { ServiceError } from "../errors.js";
import type { CorePorts } from "../ports.js";
import type { Policy } from "./policy.js";

const limiters = new WeakMap<CorePorts, RateLimiterAbstract>();

/**
 * TELEMETRY_INGEST_PER_MINUTE: events per tenant per minute, counted per event of a batch and
 * shared by every instance (the limiter's counters live in Redis with STORAGE=redis). A batch
 * that does not fit is refused whole with 429 and Retry-After; its events still count, as any
 * attempt does, so a client hammering past the limit stays limited.
 */
export async function enforceTelemetryIngest(tenantId: string, events: number, services: CorePorts): Promise<void> {
  let limiter = limiters.get(services);
  const limit = services.config.TELEMETRY_INGEST_PER_MINUTE;
  if (!limiter) {
    limiter = services.store.limiter({ name: "telemetry-ingest", points: limit, durationSeconds: 60 });
    limiters.set(services, limiter);
  }
  try {
    await limiter.consume(tenantId, Math.max(1, events));
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error;
    const retryAfter = Math.max(1, Math.ceil(error.msBeforeNext / 1000));
    throw new ServiceError(
      "RATE_LIMITED",
      `Telemetry limit of ${limit} events per minute for this tenant reached; retry in ${retryAfter} s`,
      {
        headers: { "retry-after": String(retryAfter), "x-ratelimit-limit": String(limit), "x-ratelimit-remaining": "0" },
        details: { limit, windowSeconds: 60, retryAfterSeconds: retryAfter },
      },
    );
  }
}

/** The caller's tenant: a user's personal tenant (telemetry is per tenant, docs/telemetry.md). */
export async function callerTenant(users: CorePorts["users"], userId: string): Promise<string> {
  const user = await users.get(userId);
  if (!user) throw new ServiceError("UNAUTHORIZED", "Invalid or expired API key", { details: { reason: "invalid" } });
  return user.tenantId;
}

/**
 * `policies: {ingest: "telemetry"}`: the validated batch's events (`params.events`) count
 * against the caller's tenant (TELEMETRY_INGEST_PER_MINUTE), just before the handler runs.
 */
export const telemetryIngest: Policy = {
  name: "ingest",
  stage: "params",
  applies: (method) => method.policies?.ingest === "telemetry",
  async run(call, next) {
    if (call.principal) {
      const events = (call.params as { events?: unknown }).events;
      await enforceTelemetryIngest(
        await callerTenant(call.ports.users, call.principal.userId),
        Array.isArray(events) ? events.length : 1,
        call.ports,
      );
    }
    return next();
  },
};
