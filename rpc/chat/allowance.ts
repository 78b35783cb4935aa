import * as v from "valibot";
import { ConfigError, type Config } from "../config.js";
import { ServiceError } from "../errors.js";
import type { Atomic } from "../../storage/atomic.js";

/**
 * Account API plans (DESIGN "Identity and money"): an allowance of tokens per window, shared
 * by every request of the user (spec 1: the same allowance as the web chat).
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
  if (!result.success) throw new ConfigError(result.issues.map((issue) => `PLANS_JSON: ${v.getDotPath(issue) ?? "(root)"}: ${issue.message}`));
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

/** Per-user allowance counters in the shared atomic store, so every instance sees one total. */
export class Plans {
  readonly #plans: Record<string, PlanConfig>;
  readonly #atomic: Atomic;

  constructor(plans: Record<string, PlanConfig>, atomic: Atomic) {
    this.#plans = plans;
    this.#atomic = atomic;
  }

  /** The user's plan; an id no longer configured falls back to `free`, else the first plan. */
  resolve(planId: string): { id: string; plan: PlanConfig } {
    if (this.#plans[planId]) return { id: planId, plan: this.#plans[planId]! };
    const id = this.#plans.free ? "free" : Object.keys(this.#plans)[0]!;
    return { id, plan: this.#plans[id]! };
  }

  #key(userId: string) {
    return `plan-usage:${userId}`;
  }

  async status(userId: string, planId: string): Promise<PlanStatus> {
    const { id, plan } = this.resolve(planId);
    const used = await this.#atomic.counter(this.#key(userId));
    return { id, name: plan.name ?? id, tokensPerWindow: plan.tokensPerWindow, windowSeconds: plan.windowSeconds, used, remaining: Math.max(0, plan.tokensPerWindow - used) };
  }

  /** 429 insufficient_quota once the window's allowance is spent (spec 7.1). */
  async admit(userId: string, planId: string): Promise<void> {
    const status = await this.status(userId, planId);
    if (status.remaining <= 0) {
      throw new ServiceError("QUOTA_EXCEEDED", `You have used the ${status.name} plan's allowance of ${status.tokensPerWindow} tokens for this period`, {
        type: "insufficient_quota",
      });
    }
  }

  async record(userId: string, planId: string, tokens: number): Promise<void> {
    if (tokens <= 0) return;
    const { plan } = this.resolve(planId);
    await this.#atomic.increment(this.#key(userId), tokens, plan.windowSeconds * 1000);
  }
}
