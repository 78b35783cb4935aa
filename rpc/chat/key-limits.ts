import type { Services } from "../services.js";
import { ServiceError } from "../errors.js";
import type { KeyRecord } from "../../storage/repos/keys.js";
import type { Principal } from "../auth.js";
import type { RoutedModel } from "./model-router.js";
import type { Settle } from "./run-chat.js";

/** rpmLimit and tpmLimit count per minute (docs/models-and-chat.md). */
const WINDOW_MS = 60_000;
export const MICRO_PER_CREDIT = 1_000_000;

const rpmKey = (key: KeyRecord) => `key-rpm:${key.id}`;
const tpmKey = (key: KeyRecord) => `key-tpm:${key.id}`;
const spendKey = (key: KeyRecord) => `key-spend:${key.id}`;

/** Micro-credits a key has spent since it was created. */
export function keySpend(services: Services, key: KeyRecord): Promise<number> {
  return services.store.atomic.balance(spendKey(key));
}

/** spec 7.2: 402 before any model runs, on every Platform endpoint. */
export async function requireCredits(services: Services, principal: Principal): Promise<void> {
  const balance = await services.credits.balance(principal.workspaceId!);
  if (balance <= 0) throw new ServiceError("INSUFFICIENT_CREDITS", "Insufficient credits", { type: "insufficient_quota" });
}

/**
 * Admits a Platform chat request against its key's limits, all counted in the shared atomic
 * store so every instance on one Redis sees the same totals:
 * - spendLimit (credits, lifetime of the key): 402 once reached;
 * - rpmLimit: requests per minute, 429 past it, without Retry-After (spec 7.2: clients apply
 *   their own backoff) (an atomic increment per request,
 *   so N instances together admit exactly the limit);
 * - tpmLimit: tokens per minute; the prompt is reserved at admission (429 if it does not fit)
 *   and the difference to the metered usage is added when the request settles.
 * Returns how to settle the request once its model is known (none: refused by the router,
 * nothing to charge): charge the workspace and the key's spend, true up tpm.
 */
export async function admitPlatformChat(services: Services, principal: Principal, promptTokens: number): Promise<(model: RoutedModel | undefined) => Settle> {
  const key = principal.key;
  const { atomic } = services.store;
  if (key?.spendLimit != null && (await keySpend(services, key)) >= key.spendLimit * MICRO_PER_CREDIT) {
    throw new ServiceError("INSUFFICIENT_CREDITS", `This API key has reached its spend limit of ${key.spendLimit} credits`, { type: "insufficient_quota" });
  }
  if (key?.rpmLimit != null) {
    const { value } = await atomic.increment(rpmKey(key), 1, WINDOW_MS);
    if (value > key.rpmLimit) {
      throw new ServiceError("RATE_LIMITED", `Rate limit reached for this API key: ${key.rpmLimit} requests per minute`);
    }
  }
  let reserved = 0;
  if (key?.tpmLimit != null) {
    const { value } = await atomic.increment(tpmKey(key), promptTokens, WINDOW_MS);
    if (value > key.tpmLimit) {
      await atomic.increment(tpmKey(key), -promptTokens, WINDOW_MS);
      throw new ServiceError("RATE_LIMITED", `Rate limit reached for this API key: ${key.tpmLimit} tokens per minute`);
    }
    reserved = promptTokens;
  }
  return (model) => async (usage) => {
    const cost = model ? services.models.cost(model, usage) : 0;
    // Three independent counters: written concurrently (one round trip with Redis, not three).
    const writes: Promise<unknown>[] = [];
    if (cost > 0) {
      writes.push(services.credits.charge(principal.workspaceId!, cost));
      if (key) writes.push(atomic.adjust(spendKey(key), cost));
    }
    if (key?.tpmLimit != null && usage.total_tokens !== reserved) {
      writes.push(atomic.increment(tpmKey(key), usage.total_tokens - reserved, WINDOW_MS));
    }
    await Promise.all(writes);
  };
}
