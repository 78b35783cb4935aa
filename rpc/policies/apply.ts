import type { Principal } from "../auth.js";
import type { AnyMethod } from "../define.js";
import type { Services } from "../services.js";
import { enforceBridgeRate, principalRateKey } from "./rate-limit.js";

/**
 * Runs the policies a method declares, after authentication and before its params are read.
 * `headers` receives what a policy tells the caller (rate-limit headers).
 */
export async function applyPolicies(method: AnyMethod, principal: Principal | undefined, services: Services, headers?: Headers): Promise<void> {
  if (method.policies?.rateLimit === "bridge" && principal) await enforceBridgeRate(principalRateKey(principal), services, headers);
}
