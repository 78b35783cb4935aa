import type { Services } from "../services.js";
import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import type { RoutedModel } from "./model-router.js";
import { placeHold, type Hold } from "./holds.js";
import type { Charge } from "./charge.js";

/** rpmLimit and tpmLimit count per minute (docs/models-and-chat.md). */
const WINDOW_MS = 60_000;
export const MICRO_PER_CREDIT = 1_000_000;

const insufficientCredits = () => new ServiceError("INSUFFICIENT_CREDITS", "Insufficient credits", { type: "insufficient_quota" });

/** spec 7.2: 402 before any model runs, on every Platform endpoint, when the balance is zero or below. */
export async function requireCredits(services: Services, principal: Principal): Promise<void> {
  const balance = await services.credits.balance(principal.workspaceId!);
  if (balance <= 0) throw insufficientCredits();
}

function retryAfter(ttlMs: number): Record<string, string> {
  return { "Retry-After": String(Math.max(1, Math.ceil(ttlMs / 1000))) };
}

/**
 * Admits a Platform chat request by placing one hold (rpc/chat/holds.ts) for the most it can
 * cost — the prompt at the input price plus `max_tokens` (or the model's output cap) at the
 * output price — on every account that limits it, in this order of refusal:
 * - the workspace's credits: 402 `Insufficient credits` when the balance, less what requests
 *   in flight hold, cannot cover it (OpenRouter's rule; spec 7.2 before any model runs);
 * - the key's spendLimit (credits, lifetime): 402 when spend + holds + this would pass it;
 * - rpmLimit: requests per minute, counted at once, 429 past it;
 * - tpmLimit: tokens per minute, prompt + output cap held, 429.
 * (The 429s carry Retry-After, which the Platform renderer drops: spec 7.2.)
 * One atomic step, so N instances on one Redis together never admit past any of them. The
 * hold settles to the metered cost when the request ends, however it ends.
 */
export function holdPlatformChat(services: Services, principal: Principal, model: RoutedModel, promptTokens: number, maxTokens?: number): Promise<Hold> {
  const { ledger, models } = services;
  const key = principal.key;
  const output = models.outputCap(model, promptTokens, maxTokens);
  // The dearest deployment among the model's and its fallbacks' (docs/providers.md "Money").
  const maxCost = models.maxCost(model, promptTokens, maxTokens);
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
        amount: promptTokens + output,
        limit,
        refuse: ({ ttlMs }) => new ServiceError("RATE_LIMITED", `Rate limit reached for this API key: ${limit} tokens per minute`, { headers: retryAfter(ttlMs) }),
        used: (usage) => usage.total_tokens,
      });
    }
  }
  return placeHold(services, charges);
}
