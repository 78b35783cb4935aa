import type { Principal } from "../auth.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import type { Repos } from "../repos.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { admitPlatformChat, requireCredits, type Estimate } from "./admission.js";
import type { Allowance, PlanStatus } from "./allowance.js";
import type { Charge } from "./charge.js";
import { placeHold, type Hold } from "./holds.js";
import { meteringOf, recordAgentRun, recordUsage, type Meter } from "./metering.js";
import { tenantTokensCharge, tokensUsed } from "./tenant-tokens.js";
import type { Usage } from "./types.js";
import { userPlan } from "./user-allowance.js";

export type { Estimate } from "./admission.js";
export type { Hold } from "./holds.js";
export type { Meter } from "./metering.js";
export type { PlanStatus } from "./allowance.js";
export type { Usage } from "./types.js";
export { MICRO_PER_CREDIT } from "./types.js";

/** What the money domain reads and writes. */
export type MoneyDeps = Pick<Repos, "ledger" | "credits" | "usage" | "users" | "tenants"> & {
  config: Config;
  log: Logger;
  allowance: Allowance;
};

/**
 * The money domain's port (docs/billing.md, docs/models-and-chat.md "Holds"): what chat, agents
 * and billing may do with credits, key limits, plan allowances, tenant token budgets and the
 * gateway's metering. Every admission is one hold over every account that limits the request;
 * a hold is settled to what the request used, or released, exactly once.
 */
export class Money {
  readonly #deps: MoneyDeps;

  constructor(deps: MoneyDeps) {
    this.#deps = deps;
  }

  /** 402 when the workspace's balance is zero or below (docs/interface.md 7.2), before any model runs. */
  requireCredits(principal: Principal): Promise<void> {
    return requireCredits(this.#deps, principal);
  }

  /** The workspace's balance in micro-credits. */
  balance(workspaceId: string): Promise<number> {
    return this.#deps.credits.balance(workspaceId);
  }

  /** Admits a Platform API request (credits, the key's spend limit, rpm and tpm): the rule is `admitPlatformChat`. */
  admitPlatform(principal: Principal, estimate: Estimate): Promise<Hold> {
    return admitPlatformChat(this.#deps, principal, estimate);
  }

  /** The user's plan id (Account and Gateway chat). */
  userPlan(userId: string): Promise<string> {
    return userPlan(this.#deps, userId);
  }

  /** The user's plan and what is left of it in the window. */
  planStatus(userId: string, planId: string): Promise<PlanStatus> {
    return this.#deps.allowance.status(userId, planId);
  }

  /**
   * Admits an Account or Gateway request that may use up to `tokens` of the user's plan, `prompt`
   * of them known before the model runs (429 when nothing is left or the prompt alone does not fit).
   */
  admitUser(userId: string, planId: string, tokens: number, prompt: number): Promise<Hold> {
    return this.hold([this.#deps.allowance.charge(userId, planId, tokens, prompt)]);
  }

  /** Admits one agent model turn that may use up to `tokens` of the tenant's month, `prompt` of them known (429 past it). */
  admitTenantTurn(tenant: Tenant, tokens: number, prompt: number): Promise<Hold> {
    return this.hold([tenantTokensCharge(this.#deps, tenant, tokens, prompt)]);
  }

  /** Tokens the tenant's turns used this calendar month (UTC). */
  tenantTokensUsed(tenantId: string): Promise<number> {
    return tokensUsed(this.#deps, tenantId);
  }

  /** One hold over several charges, atomically (rpc/money/holds.ts). */
  hold(charges: Charge[]): Promise<Hold> {
    return placeHold(this.#deps, charges);
  }

  /**
   * Settles a hold to the metered usage and counts the request in the gateway's metering, in
   * one step (one round trip on Redis, one journal flush on fs): the amounts the ledger takes
   * and the ones the metering counts are the same (docs/billing.md "Usage").
   */
  async settleMetered(hold: Hold, principal: Principal | undefined, meter: Meter, usage: Usage, cost: number): Promise<void> {
    const { counters, later } = await meteringOf(this.#deps, principal, meter, usage, cost);
    await hold.settle(usage, cost, counters);
    await later?.();
  }

  /** Counts a settled request in the gateway's metering (never fails the caller). */
  recordUsage(principal: Principal | undefined, meter: Meter, usage: Usage, cost: number): Promise<void> {
    return recordUsage(this.#deps, principal, meter, usage, cost);
  }

  /** Counts an agent run as it starts (never fails the caller). */
  recordAgentRun(tenantId: string, agentId: string, model: string): Promise<void> {
    return recordAgentRun(this.#deps, tenantId, agentId, model);
  }
}

declare module "../ports.js" {
  interface DomainExports {
    /** Credits, key limits, plan allowances, tenant token budgets and metering (rpc/money). */
    money: Money;
  }
}
