import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import type { Config } from "../config.js";
import type { CreditsRepo } from "../../storage/repos/credits.js";
import type { LedgerRepo } from "../../storage/repos/ledger.js";
import { placeHold, type Hold } from "./holds.js";
import type { Charge } from "./charge.js";
import { MICRO_PER_CREDIT } from "./types.js";

/** What admission reads: the ledger, the balances, the hold lease. */
export interface AdmissionDeps {
  ledger: LedgerRepo;
  credits: CreditsRepo;
  config: Pick<Config, "HOLD_LEASE_SECONDS">;
}

/** The most a request may cost and use, computed by its caller from the model's prices and output cap. */
export interface Estimate {
  /** Credits in micro-credits (rpc/money/types.ts MICRO_PER_CREDIT): prompt at the input price plus the output cap at the output price. */
  maxCost: number;
  /** Tokens: the prompt plus the output cap. */
  tokens: number;
}

/** rpmLimit and tpmLimit count per minute (docs/models-and-chat.md). */
const WINDOW_MS = 60_000;

const insufficientCredits = () => new ServiceError("INSUFFICIENT_CREDITS", "Insufficient credits", { type: "insufficient_quota" });

/** spec 7.2: 402 before any model runs, on every Platform endpoint, when the balance is zero or below. */
export async function requireCredits(services: Pick<AdmissionDeps, "credits">, principal: Principal): Promise<void> {
  const balance = await services.credits.balance(principal.workspaceId!);
  if (balance <= 0) throw insufficientCredits();
}

function retryAfter(ttlMs: number): Record<string, string> {
  return { "Retry-After": String(Math.max(1, Math.ceil(ttlMs / 1000))) };
}

/**
 * The admission rule of the Platform API: admits a chat request by placing one hold
 * (rpc/money/holds.ts) for the most it can cost (`estimate`: the prompt at the input price
 * plus `max_tokens` or the model's output cap at the output price) on every account that
 * limits it, in this order of refusal:
 * - the workspace's credits: 402 `Insufficient credits` when the balance, less what requests
 *   in flight hold, cannot cover it (OpenRouter's rule; spec 7.2 before any model runs);
 * - the key's spendLimit (credits, lifetime): 402 when spend + holds + this would pass it;
 * - rpmLimit: requests per minute, counted at once, 429 past it;
 * - tpmLimit: tokens per minute, prompt + output cap held, 429.
 * (The 429s carry Retry-After, which the Platform renderer drops: spec 7.2.)
 * One atomic step, so N instances on one Redis together never admit past any of them. The
 * hold settles to the metered cost when the request ends, however it ends.
 */
export function admitPlatformChat(services: AdmissionDeps, principal: Principal, estimate: Estimate): Promise<Hold> {
  const { ledger } = services;
  const key = principal.key;
  const { maxCost } = estimate;
  const cost = (_usage: unknown, cost: number) => cost;
  const charges: Charge[] = [
    // A free request still needs a positive balance (spec 7.2: zero or below is 402).
    { account: ledger.credits(principal.workspaceId!), amount: maxCost, limit: maxCost > 0 ? 0 : 1, refuse: insufficientCredits, used: cost },
  ];
  if (key) {
    charges.push(
      key.spendLimit != null
        ? {
            account: ledger.keySpend(key.id),
            amount: maxCost,
            limit: key.spendLimit * MICRO_PER_CREDIT,
            refuse: () => new ServiceError("INSUFFICIENT_CREDITS", `This API key has reached its spend limit of ${key.spendLimit} credits`, { type: "insufficient_quota" }),
            used: cost,
          }
        : { account: ledger.keySpend(key.id), amount: 0, track: true, used: cost },
    );
    if (key.rpmLimit != null) {
      const limit = key.rpmLimit;
      charges.push({
        account: ledger.keyRequests(key.id, WINDOW_MS),
        amount: 1,
        limit,
        commit: true,
        refuse: ({ ttlMs }) => new ServiceError("RATE_LIMITED", `Rate limit reached for this API key: ${limit} requests per minute`, { headers: retryAfter(ttlMs) }),
      });
    }
    if (key.tpmLimit != null) {
      const limit = key.tpmLimit;
      charges.push({
        account: ledger.keyTokens(key.id, WINDOW_MS),
        amount: estimate.tokens,
        limit,
        refuse: ({ ttlMs }) => new ServiceError("RATE_LIMITED", `Rate limit reached for this API key: ${limit} tokens per minute`, { headers: retryAfter(ttlMs) }),
        used: (usage) => usage.total_tokens,
      });
    }
  }
  return placeHold(services, charges);
}
