import type { CallContext } from "../define.js";
import { unauthorized } from "../auth.js";
import type { Settle } from "./run-chat.js";

/**
 * Account and Gateway chat draw on the user's plan allowance (spec 1: the same allowance as
 * the web chat): 429 insufficient_quota once it is spent, tokens recorded when a request settles.
 */
export async function admitUserChat(ctx: CallContext, userId: string): Promise<{ planId: string; settle: Settle }> {
  const user = await ctx.services.users.get(userId);
  if (!user) throw unauthorized("invalid");
  const { id: planId } = ctx.services.plans.resolve(user.plan);
  await ctx.services.plans.admit(userId, planId);
  return { planId, settle: (usage) => ctx.services.plans.record(userId, planId, usage.total_tokens) };
}
