import type { Principal } from "../auth.js";
import type { Logger } from "../log.js";
import type { Usage } from "./types.js";
import type { Repos } from "../repos.js";

/** What metering reads and writes. */
export type MeteringDeps = Pick<Repos, "usage" | "tenants" | "users"> & { log: Logger };

/** Where a metered request is counted (docs/billing.md "Usage"). */
export interface Meter {
  surface: "platform" | "account" | "gateway" | "agent";
  model: string;
  /** True when the request's cost is taken from a workspace's credits (the Platform API). */
  credits: boolean;
  agentId?: string;
  /** The agent's tenant; otherwise the workspace's (platform) or the user's personal tenant. */
  tenantId?: string;
}

const day = (at = new Date()) => at.toISOString().slice(0, 10);

/**
 * Counts one settled request in the gateway's own metering, right after the ledger settled it:
 * `credits` is the amount the ledger took, rounded the same way (storage/repos/ledger.ts), so
 * the sums reconcile exactly with the balance. A failure is logged, never the caller's error.
 */
export async function recordUsage(
  services: MeteringDeps,
  principal: Principal | undefined,
  meter: Meter,
  usage: Usage,
  cost: number,
): Promise<void> {
  const counters = await usageCounters(services, principal, meter, usage, cost);
  try {
    await services.usage.add(counters);
  } catch (error) {
    services.log.error({ event: "usage.metering", error: String(error) });
  }
}

/**
 * The metering counters of one settled request (storage/repos/usage.ts), for the ledger's
 * settlement to add in its own step (rpc/money/money.ts `settleMetered`: one round trip on
 * Redis for both). A failure is logged and yields none, never the caller's error.
 */
export async function usageCounters(
  services: MeteringDeps,
  principal: Principal | undefined,
  meter: Meter,
  usage: Usage,
  cost: number,
): Promise<[key: string, delta: number][]> {
  try {
    const workspaceId = meter.surface === "platform" ? principal?.workspaceId : undefined;
    let tenantId = meter.tenantId;
    if (!tenantId && workspaceId) tenantId = (await services.tenants.recentWorkspace(workspaceId))?.tenantId;
    if (!tenantId && principal) tenantId = (await services.users.recent(principal.userId))?.tenantId;
    if (!tenantId) return [];
    return await services.usage.counters(
      tenantId,
      {
        day: day(),
        surface: meter.surface,
        model: meter.model,
        ...(workspaceId ? { workspaceId } : {}),
        ...(principal?.key ? { keyId: principal.key.id } : {}),
        ...(meter.agentId ? { agentId: meter.agentId } : {}),
      },
      {
        requests: 1,
        inputTokens: usage.prompt_tokens,
        outputTokens: usage.completion_tokens,
        credits: meter.credits ? Math.max(0, Math.ceil(cost)) : 0,
      },
    );
  } catch (error) {
    services.log.error({ event: "usage.metering", error: String(error) });
    return [];
  }
}

/** Counts an agent run as it starts. */
export async function recordAgentRun(services: MeteringDeps, tenantId: string, agentId: string, model: string): Promise<void> {
  try {
    await services.usage.record(tenantId, { day: day(), surface: "agent", model, agentId }, { agentRuns: 1 });
  } catch (error) {
    services.log.error({ event: "usage.metering", error: String(error) });
  }
}
