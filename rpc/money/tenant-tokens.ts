import { ServiceError } from "../errors.js";
import { monthKey } from "../time.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import type { LedgerRepo } from "../../storage/repos/ledger.js";
import type { Charge } from "./charge.js";

/** Tokens the tenant's invocations used this calendar month (UTC), settled requests only. */
export async function tokensUsed(services: { ledger: LedgerRepo }, tenantId: string, now = new Date()): Promise<number> {
  return (await services.ledger.state(services.ledger.tenantTokens(tenantId, monthKey(now)))).value;
}

/**
 * The tenant's month as a charge of one model turn that may use up to `tokens` (prompt plus
 * output cap), `prompt` of them known before the model runs: admitted while something of
 * `limits.tokensPerMonth` remains, less what turns in flight hold, and the prompt fits in it
 * (storage/admission.ts), else 429 (docs/agents.md "Limits").
 */
export function tenantTokensCharge(
  services: { ledger: LedgerRepo },
  tenant: Tenant,
  tokens: number,
  prompt: number,
  now = new Date(),
): Charge {
  const limit = tenant.limits.tokensPerMonth;
  return {
    account: services.ledger.tenantTokens(tenant.id, monthKey(now)),
    amount: tokens,
    known: prompt,
    limit,
    refuse: ({ value: used, held, reason, remaining, known }, requested) => {
      const nextMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
      return new ServiceError(
        "QUOTA_EXCEEDED",
        reason === "prompt"
          ? `Token allowance too small for this model turn: its prompt of ${known} tokens is more than the ${remaining} tokens left of tenant ${tenant.slug}'s ${limit} tokens this month`
          : `Token allowance spent: tenant ${tenant.slug} used ${used} of ${limit} tokens this month` +
              (used < limit ? ` and the rest is held by model turns in flight (${held} tokens)` : ""),
        {
          details: { tenantId: tenant.id, used, held, requested, prompt: known, limit, resetsAt: nextMonth.toISOString() },
          headers: { "Retry-After": String(Math.max(1, Math.ceil((nextMonth.getTime() - now.getTime()) / 1000))) },
          type: "insufficient_quota",
        },
      );
    },
    used: (usage) => usage.total_tokens,
  };
}
