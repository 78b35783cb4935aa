import type { CallContext } from "../define.js";
import { unauthorized } from "../auth.js";
import type { RoutedModel } from "./model-router.js";
import { placeHold, type Hold } from "./holds.js";

/** The user's plan id (Account and Gateway chat draw on it; spec 1: the same allowance as the web chat). */
export async function userPlan(ctx: CallContext, userId: string): Promise<string> {
  const user = await ctx.services.users.recent(userId);
  if (!user) throw unauthorized("invalid");
  return ctx.services.allowance.resolve(user.plan).id;
}

/**
 * Holds the most a request can use of the user's plan allowance — prompt tokens plus
 * `max_tokens` (or the model's output cap) — before the model runs: 429 insufficient_quota
 * when what is left of the window, less what requests in flight hold, cannot cover it.
 */
export function holdUserChat(ctx: CallContext, userId: string, planId: string, model: RoutedModel, promptTokens: number, maxTokens?: number): Promise<Hold> {
  const output = ctx.services.models.outputCap(model, promptTokens, maxTokens);
  return placeHold(ctx.services, [ctx.services.allowance.charge(userId, planId, promptTokens + output)]);
}
