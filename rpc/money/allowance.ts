import * as v from "valibot";
import { ConfigError, type Config } from "../config.js";
import { ServiceError } from "../errors.js";
import type { LedgerRepo } from "../../storage/repos/ledger.js";
import type { Charge } from "./charge.js";

/**
 * Account API plans (docs/architecture.md "Identity and money"): an allowance of tokens per window, shared
 * by every request of the user (docs/interface.md 1: the same allowance as the web chat).
 */
const Plan = v.strictObject({
  /** Tokens (prompt + completion) a user may spend per window. */
  tokensPerWindow: v.pipe(v.number(), v.integer(), v.minValue(0)),
  /** Length of the window in seconds; it starts at the first request after the last one ended. */
  windowSeconds: v.pipe(v.number(), v.integer(), v.minValue(1)),
  /** Shown in the catalog; defaults to the plan id. */
  name: v.optional(v.string()),
});

export type PlanConfig = v.InferOutput<typeof Plan>;

const DEFAULT_PLANS: Record<string, PlanConfig> = {
  free: { name: "Free", tokensPerWindow: 100_000, windowSeconds: 86_400 },
  pro: { name: "Pro", tokensPerWindow: 2_000_000, windowSeconds: 86_400 },
};

export function loadPlans(config: Pick<Config, "PLANS_JSON">): Record<string, PlanConfig> {
  if (!config.PLANS_JSON) return { ...DEFAULT_PLANS };
  let raw: unknown;
  try {
    raw = JSON.parse(config.PLANS_JSON);
  } catch (error) {
    throw new ConfigError([`PLANS_JSON: not valid JSON (${(error as Error).message})`]);
  }
  const result = v.safeParse(v.record(v.pipe(v.string(), v.regex(/^[\w.-]{1,64}$/)), Plan), raw);
  if (!result.success)
    throw new ConfigError(result.issues.map((issue) => `PLANS_JSON: ${v.getDotPath(issue) ?? "(root)"}: ${issue.message}`));
  if (Object.keys(result.output).length === 0) throw new ConfigError(["PLANS_JSON: at least one plan is required"]);
  return result.output;
}

export interface PlanStatus {
  id: string;
  name: string;
  tokensPerWindow: number;
  windowSeconds: number;
  used: number;
  remaining: number;
}

/** Per-user allowance accounts on the ledger, so every instance sees one total and requests in flight hold their share. */
export class Allowance {
  readonly #plans: Record<string, PlanConfig>;
  readonly #ledger: LedgerRepo;

  constructor(plans: Record<string, PlanConfig>, ledger: LedgerRepo) {
    this.#plans = plans;
    this.#ledger = ledger;
  }

  /** The user's plan; an id no longer configured falls back to `free`, else the first plan. */
  resolve(planId: string): { id: string; plan: PlanConfig } {
    if (this.#plans[planId]) return { id: planId, plan: this.#plans[planId]! };
    const id = this.#plans.free ? "free" : Object.keys(this.#plans)[0]!;
    return { id, plan: this.#plans[id]! };
  }

  #account(userId: string, plan: PlanConfig) {
    return this.#ledger.planTokens(userId, plan.windowSeconds * 1000);
  }

  /** `used`: tokens settled in the window; `remaining` also leaves out what requests in flight hold. */
  async status(userId: string, planId: string): Promise<PlanStatus> {
    const { id, plan } = this.resolve(planId);
    const { value: used, held } = await this.#ledger.state(this.#account(userId, plan));
    return {
      id,
      name: plan.name ?? id,
      tokensPerWindow: plan.tokensPerWindow,
      windowSeconds: plan.windowSeconds,
      used,
      remaining: Math.max(0, plan.tokensPerWindow - used - held),
    };
  }

  /**
   * The plan allowance as a charge of a request that may use up to `tokens`, `prompt` of them
   * known before the model runs: admitted while something of the window's allowance remains and
   * the prompt fits in it (storage/admission.ts), else 429 insufficient_quota (docs/interface.md
   * 7.1) naming the plan.
   */
  charge(userId: string, planId: string, tokens: number, prompt: number): Charge {
    const { id, plan } = this.resolve(planId);
    const name = plan.name ?? id;
    return {
      account: this.#account(userId, plan),
      amount: tokens,
      known: prompt,
      limit: plan.tokensPerWindow,
      refuse: ({ value, held, reason, remaining, known }) =>
        new ServiceError(
          "QUOTA_EXCEEDED",
          reason === "prompt"
            ? `This request's prompt of ${known} tokens is more than the ${remaining} tokens left of the ${name} plan's allowance of ${plan.tokensPerWindow} tokens for this period`
            : value >= plan.tokensPerWindow
              ? `You have used the ${name} plan's allowance of ${plan.tokensPerWindow} tokens for this period`
              : `The rest of the ${name} plan's allowance of ${plan.tokensPerWindow} tokens for this period is held by requests in flight (${value} used, ${held} held); try again when they end`,
          { type: "insufficient_quota" },
        ),
      used: (usage) => usage.total_tokens,
    };
  }
}
