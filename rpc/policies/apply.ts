import type { Principal } from "../auth.js";
import type { AnyMethod } from "../define.js";
import type { CorePorts } from "../ports.js";
import { enforceBridgeRate, principalRateKey } from "./rate-limit.js";
import { callerTenant, enforceTelemetryIngest } from "./telemetry-ingest.js";

/**
 * Runs the policies a method declares, after authentication and before its params are read.
 * `headers` receives what a policy tells the caller (rate-limit headers).
 */
export async function applyPolicies(method: AnyMethod, principal: Principal | undefined, services: CorePorts, headers?: Headers): Promise<void> {
  if (method.policies?.rateLimit === "bridge" && principal) await enforceBridgeRate(principalRateKey(principal), services, headers);
}

/** Policies whose cost depends on the validated params (a batch's size); run just before the handler. */
export async function applyParamPolicies(method: AnyMethod, principal: Principal | undefined, params: unknown, services: CorePorts): Promise<void> {
  if (method.policies?.ingest === "telemetry" && principal) {
    const events = (params as { events?: unknown }).events;
    await enforceTelemetryIngest(await callerTenant(services.users, principal.userId), Array.isArray(events) ? events.length : 1, services);
  }
}
