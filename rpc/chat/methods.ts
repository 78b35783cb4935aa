import { principalOf } from "../auth.js";
import { countPromptTokens, usageOf } from "./tokens.js";
import { ChatBody, runChat, toChatRequest, type ChatBodyInput } from "./run-chat.js";
import type { RoutedModel } from "./model-router.js";
import type { Hold, Meter } from "../money/money.js";
import type { ChatRequest } from "./types.js";
import { ChatCompletionView } from "../views.js";
import { chatDomain, type ChatContext } from "./deps.js";

/**
 * From here on the request has reached the router (spec 4.2): the response carries
 * `X-Service-Request-Id`, success or forwarded error. Earlier refusals (400, 401, 402, 403
 * on scope, key limits) never get it.
 */
function enterRouter(ctx: ChatContext): void {
  ctx.responseHeaders.set("X-Service-Request-Id", ctx.requestId);
}

/**
 * The one path of every chat surface: resolve the model (its price and output cap size the
 * hold), place the hold before anything runs, then run and settle (rpc/chat/run-chat.ts).
 * A model the router refuses is refused after `beforeRouterError` (the 402 check of a
 * workspace without credits comes first on the Platform API).
 */
async function holdAndRun(
  ctx: ChatContext,
  body: ChatBodyInput,
  plan: string | undefined,
  hold: (model: RoutedModel, request: ChatRequest, promptTokens: number) => Promise<Hold>,
  beforeRouterError: (() => Promise<void>) | undefined,
  meter: Pick<Meter, "surface" | "credits">,
) {
  const request = toChatRequest(body);
  let model: RoutedModel;
  try {
    model = ctx.deps.models.resolve(request.model, plan);
    ctx.deps.models.annotate(model.id, ctx.responseHeaders);
  } catch (error) {
    await beforeRouterError?.();
    enterRouter(ctx);
    throw error;
  }
  const promptTokens = countPromptTokens(request.messages);
  const held = await hold(model, request, promptTokens);
  enterRouter(ctx);
  return runChat(ctx, {
    model,
    request,
    promptTokens,
    includeUsage: body.stream_options?.include_usage === true,
    // Settled on the ledger and counted in the metering with the same amounts (docs/billing.md
    // "Usage"), sent together: one journal flush on fs, one round trip on Redis.
    settle: async (usage) => {
      const cost = ctx.deps.models.cost(model, usage);
      await Promise.all([held.settle(usage, cost), ctx.deps.money.recordUsage(ctx.principal, { ...meter, model: model.id }, usage, cost)]);
    },
  });
}

/** A chat on the user's plan allowance (Account and Gateway surfaces): no workspace credits are held. */
async function userChat(ctx: ChatContext, params: ChatBodyInput, surface: "account" | "gateway") {
  const userId = principalOf(ctx).userId;
  const planId = await ctx.deps.money.userPlan(userId);
  return holdAndRun(ctx, params, planId, (model, request, promptTokens) => ctx.deps.money.admitUser(userId, planId, promptTokens + ctx.deps.models.outputCap(model, promptTokens, request.max_tokens)), undefined, {
    surface,
    credits: false,
  });
}

export const chatMethods = [
  chatDomain.method({
    name: "platform.chat.completions",
    summary:
      "Chat completion billed to the key's workspace (spec 4.2); SSE chunks ending in [DONE] when stream is true. 402 when the credits left cannot cover the most the request can cost (prompt plus max_tokens).",
    input: ChatBody,
    auth: { kinds: ["platform_key"], scopes: ["chat:write"] },
    output: ChatCompletionView,
    errors: ["INSUFFICIENT_CREDITS", "RATE_LIMITED", "FORBIDDEN", "UPSTREAM", "TIMEOUT"],
    http: [{ surface: "platform", method: "POST", path: "/chat/completions" }],
    stream: { done: "[DONE]" },
    async handler(params, ctx) {
      const principal = principalOf(ctx);
      return holdAndRun(
        ctx,
        params,
        undefined,
        (model, request, promptTokens) => {
          // The most the request can cost: the prompt plus max_tokens (or the model's output cap).
          const output = ctx.deps.models.outputCap(model, promptTokens, request.max_tokens);
          return ctx.deps.money.admitPlatform(principal, { maxCost: ctx.deps.models.cost(model, usageOf(promptTokens, output)), tokens: promptTokens + output });
        },
        () => ctx.deps.money.requireCredits(principal),
        { surface: "platform", credits: true },
      );
    },
  }),

  chatDomain.method({
    name: "account.chat.completions",
    summary: "Chat completion on the account's plan allowance (spec 4.1); needs scope intelligence.",
    input: ChatBody,
    auth: { kinds: ["account_key"], scopes: ["intelligence"], scopeError: "INSUFFICIENT_CAPABILITY" },
    output: ChatCompletionView,
    errors: ["QUOTA_EXCEEDED", "FORBIDDEN", "INSUFFICIENT_CAPABILITY", "UPSTREAM", "TIMEOUT"],
    http: [{ surface: "account", method: "POST", path: "/chat/completions" }],
    stream: { done: "[DONE]" },
    handler: (params, ctx) => userChat(ctx, params, "account"),
  }),

  chatDomain.method({
    name: "gateway.chat.completions",
    summary: "Chat completion through the model router for a signed-in user or gateway key (spec 4.4), on the user's plan allowance.",
    input: ChatBody,
    auth: { kinds: ["session", "gateway_key"] },
    output: ChatCompletionView,
    errors: ["QUOTA_EXCEEDED", "FORBIDDEN", "UPSTREAM", "TIMEOUT"],
    http: [{ surface: "gateway", method: "POST", path: "/chat/completions" }],
    stream: { done: "[DONE]" },
    handler: (params, ctx) => userChat(ctx, params, "gateway"),
  }),
];
