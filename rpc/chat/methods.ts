import { defineMethod, type CallContext } from "../define.js";
import { principalOf } from "../auth.js";
import { countPromptTokens, usageOf } from "./tokens.js";
import { ChatBody, runChat, toChatRequest, type ChatBodyInput, type Settle } from "./run-chat.js";
import { admitPlatformChat, requireCredits } from "./key-limits.js";
import { admitUserChat } from "./user-allowance.js";
import type { RoutedModel } from "./model-router.js";

/**
 * From here on the request has reached the router (spec 4.2): the response carries
 * `X-Service-Request-Id`, success or forwarded error. Earlier refusals (400, 401, 402, 403
 * on scope, key limits) never get it.
 */
function enterRouter(ctx: CallContext): void {
  ctx.responseHeaders.set("X-Service-Request-Id", ctx.requestId);
}

async function routeAndRun(ctx: CallContext, body: ChatBodyInput, settleFor: (model: RoutedModel | undefined) => Settle, plan?: string) {
  enterRouter(ctx);
  const request = toChatRequest(body);
  let model: RoutedModel;
  try {
    model = ctx.services.models.resolve(request.model, plan);
    ctx.services.models.annotate(model.id, ctx.responseHeaders);
  } catch (error) {
    await settleFor(undefined)(usageOf(0, 0), true);
    throw error;
  }
  return runChat(ctx, { model, request, includeUsage: body.stream_options?.include_usage === true, settle: settleFor(model) });
}

export const chatMethods = [
  defineMethod({
    name: "platform.chat.completions",
    summary: "Chat completion billed to the key's workspace (spec 4.2); SSE chunks ending in [DONE] when stream is true.",
    input: ChatBody,
    auth: { kinds: ["platform_key"], scopes: ["chat:write"] },
    http: [{ surface: "platform", method: "POST", path: "/chat/completions" }],
    stream: { done: "[DONE]" },
    async handler(params, ctx) {
      const principal = principalOf(ctx);
      await requireCredits(ctx.services, principal);
      const settleFor = await admitPlatformChat(ctx.services, principal, countPromptTokens(params.messages!));
      return routeAndRun(ctx, params, settleFor);
    },
  }),

  defineMethod({
    name: "account.chat.completions",
    summary: "Chat completion on the account's plan allowance (spec 4.1); needs scope intelligence.",
    input: ChatBody,
    auth: { kinds: ["account_key"], scopes: ["intelligence"], scopeError: "INSUFFICIENT_CAPABILITY" },
    http: [{ surface: "account", method: "POST", path: "/chat/completions" }],
    stream: { done: "[DONE]" },
    async handler(params, ctx) {
      const { planId, settle } = await admitUserChat(ctx, principalOf(ctx).userId);
      return routeAndRun(ctx, params, () => settle, planId);
    },
  }),

  defineMethod({
    name: "gateway.chat.completions",
    summary: "Chat completion through the model router for a signed-in user or gateway key (spec 4.4), on the user's plan allowance.",
    input: ChatBody,
    auth: { kinds: ["session", "gateway_key"] },
    http: [{ surface: "gateway", method: "POST", path: "/chat/completions" }],
    stream: { done: "[DONE]" },
    async handler(params, ctx) {
      const { planId, settle } = await admitUserChat(ctx, principalOf(ctx).userId);
      return routeAndRun(ctx, params, () => settle, planId);
    },
  }),
];
