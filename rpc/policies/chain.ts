import type { AnyMethod } from "../define.js";
import type { CallSurface } from "../surfaces.js";
import { archivedWorkspace } from "./archived-workspace.js";
import { authenticate, operatorOnly } from "./authenticate.js";
import { observe } from "./observe.js";
import type { Policy, PolicyCall } from "./policy.js";
import { rateLimit } from "./rate-limit.js";
import { telemetryIngest } from "./telemetry-ingest.js";
import { tenantRateLimit } from "./tenant-rate-limit.js";

/**
 * The policy chain of every call, in its one fixed order (docs/architecture.md "The chain of a
 * call"): the call is observed (log and metrics, whatever its outcome), the caller
 * authenticated, an archived workspace's keys refused, operator-only methods checked, the
 * credential's request budget counted; then the params are read and validated, and the
 * policies on the params (the tenant's Gateway budget, which may be named by the params, and
 * the telemetry ingest limit) run just before the handler. Each entry
 * decides from the method's declaration and the surface's profile whether it applies.
 */
export const CHAIN: readonly Policy[] = [
  observe,
  authenticate,
  archivedWorkspace,
  operatorOnly,
  rateLimit,
  tenantRateLimit,
  telemetryIngest,
];

/** The policies of one method through one surface, by stage, in chain order. */
export interface MethodChain {
  call: readonly Policy[];
  params: readonly Policy[];
}

export function chainOf(method: AnyMethod, surface: CallSurface): MethodChain {
  const applying = CHAIN.filter((policy) => policy.applies(method, surface));
  return { call: applying.filter((policy) => policy.stage === "call"), params: applying.filter((policy) => policy.stage === "params") };
}

/** Runs `policies` in order around `last`. */
export function runChain(policies: readonly Policy[], call: PolicyCall, last: () => Promise<unknown>): Promise<unknown> {
  const step = (index: number): Promise<unknown> =>
    index === policies.length ? last() : policies[index]!.run(call, () => step(index + 1));
  return step(0);
}
