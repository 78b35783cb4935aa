import type { Principal } from "../auth.js";
import type { Logger } from "../log.js";
import type { Usage } from "./types.js";
import type { Repos } from "../repos.js";
import type { UsageCounts, UsageDims } from "../../storage/repos/usage.js";

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
  try {
    const metered = await usageOf(services, principal, meter, usage, cost);
    if (metered) await services.usage.record(...metered);
  } catch (error) {
    services.log.error({ event: "usage.metering", error: String(error) });
  }
}

/**
 * The metering of one settled request, for the ledger's settlement to carry (rpc/money/money.ts
 * `settleMetered`: one round trip on Redis for both): its counter increments when its rollup is
 * known here, else none and `later`, which writes the rollup's record and then adds the counts
 * (the first request of a rollup in a process: the settlement does not wait for that record).
 * A failure is logged and meters nothing, never the caller's error.
 */
export async function meteringOf(
  services: MeteringDeps,
  principal: Principal | undefined,
  meter: Meter,
  usage: Usage,
  cost: number,
): Promise<{ counters: [key: string, delta: number][]; later?: () => Promise<void> }> {
  try {
    const metered = await usageOf(services, principal, meter, usage, cost);
    if (!metered) return { counters: [] };
    const counters = services.usage.knownCounters(...metered);
    if (counters) return { counters };
    return {
      counters: [],
      later: () =>
        services.usage.record(...metered).catch((error: unknown) => services.log.error({ event: "usage.metering", error: String(error) })),
    };
  } catch (error) {
    services.log.error({ event: "usage.metering", error: String(error) });
    return { counters: [] };
  }
}

/** Where and what one settled request counts: its tenant, its rollup's dimensions and its counts; undefined without a tenant. */
async function usageOf(
  services: MeteringDeps,
  principal: Principal | undefined,
  meter: Meter,
  usage: Usage,
  cost: number,
): Promise<[tenantId: string, dims: UsageDims, counts: Partial<UsageCounts>] | undefined> {
  const workspaceId = meter.surface === "platform" ? principal?.workspaceId : undefined;
  let tenantId = meter.tenantId;
  if (!tenantId && workspaceId) tenantId = (await services.tenants.recentWorkspace(workspaceId))?.tenantId;
  if (!tenantId && principal) tenantId = (await services.users.recent(principal.userId))?.tenantId;
  if (!tenantId) return undefined;
  return [
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
  ];
}

/** Counts an agent run as it starts. */
export async function recordAgentRun(services: MeteringDeps, tenantId: string, agentId: string, model: string): Promise<void> {
  try {
    await services.usage.record(tenantId, { day: day(), surface: "agent", model, agentId }, { agentRuns: 1 });
  } catch (error) {
    services.log.error({ event: "usage.metering", error: String(error) });
  }
}
