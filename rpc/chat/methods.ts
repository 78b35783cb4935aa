import { principalOf } from "../auth.js";
import { countInputTokens, countPromptTokens } from "./tokens.js";
import { runChat } from "./run-chat.js";
import { ChatBody, PlatformChatBody, chatToCanonical, toChatRequest, type ChatBodyInput } from "./dialects/chat.js";
import type { RoutedModel } from "./model-router.js";
import type { Hold, Meter } from "../money/money.js";
import type { ChatRequest } from "./types.js";
import { ChatCompletionView } from "../views.js";
import { SURFACES } from "../surfaces.js";
import { chatDomain, type ChatContext } from "./deps.js";
import { endingWith, takeStreamPlace } from "../quotas.js";
import { allowanceOf } from "../allow-list.js";

/**
 * From here on the request has reached the router (docs/interface.md 4.2): the response carries
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
  request: ChatRequest,
  includeUsage: boolean,
  plan: string | undefined,
  hold: (model: RoutedModel, request: ChatRequest, promptTokens: number) => Promise<Hold>,
  beforeRouterError: (() => Promise<void>) | undefined,
  meter: Pick<Meter, "surface" | "credits">,
) {
  let model: RoutedModel;
  try {
    model = ctx.deps.models.resolve(request.model, (await allowanceOf(ctx.deps, ctx.principal)).models, plan);
    // A deprecated model: Account and Gateway answers carry Deprecation and X-Model-Warning; the
    // Platform adds no service header (rpc/surfaces.ts, docs/interface.md 4.2), so there the notice is in the
    // catalog entry and the request's log line (docs/model-registry.md).
    const warning = ctx.deps.models.deprecation(model.id);
    if (warning && !SURFACES[ctx.surface].serviceHeaders) {
      if (ctx.logFields) ctx.logFields.modelWarning = warning.message;
    } else {
      ctx.deps.models.annotate(model.id, ctx.responseHeaders);
    }
  } catch (error) {
    await beforeRouterError?.();
    enterRouter(ctx);
    throw error;
  }
  const promptTokens = countPromptTokens(request.messages);
  // A stream takes a place among its credential's streams in flight first (QUOTA_STREAMS_PER_KEY,
  // docs/quotas.md): 429 before anything is held or sent; the place is given back when it ends.
  const place = request.stream ? await takeStreamPlace(ctx.deps, principalOf(ctx), ctx.signal) : undefined;
  const run = async () => {
    // Admission knows the whole input, tool definitions included (docs/billing.md "Admission").
    const held = await hold(model, request, countInputTokens(request.messages, request.tools));
    enterRouter(ctx);
    return runChat(ctx, {
      model,
      request,
      promptTokens,
      includeUsage,
      // Settled on the ledger and counted in the metering with the same amounts (docs/billing.md
      // "Usage"), in one step: one journal flush on fs, one script on Redis.
      // The cost is at the price of the deployment that answered (docs/providers.md "Money").
      settle: (usage, _estimated, cost) => ctx.deps.money.settleMetered(held, ctx.principal, { ...meter, model: model.id }, usage, cost),
    });
  };
  if (!place) return run();
  let answer: Awaited<ReturnType<typeof run>>;
  try {
    answer = await run();
  } catch (error) {
    await place.release();
    throw error;
  }
  if (Symbol.asyncIterator in answer) return endingWith(answer, place.release);
  await place.release();
  return answer;
}

/**
 * A chat on the user's plan allowance (Account and Gateway surfaces): no workspace credits are
 * held. The canonical request comes from the chat body or a dialect (rpc/chat/dialect-methods.ts);
 * `includeUsage` keeps the usage chunk in a stream (a dialect always reads it).
 */
export async function userChat(ctx: ChatContext, request: ChatRequest, includeUsage: boolean, surface: "account" | "gateway") {
  const userId = principalOf(ctx).userId;
  const planId = await ctx.deps.money.userPlan(userId);
  return holdAndRun(
    ctx,
    request,
    includeUsage,
    planId,
    (model, request, promptTokens) =>
      ctx.deps.money.admitUser(
        userId,
        planId,
        promptTokens + ctx.deps.models.outputCap(model, promptTokens, request.max_tokens),
        promptTokens,
      ),
    undefined,
    { surface, credits: false },
  );
}

/**
 * What a model call on the user's plan may answer, and who may make one: the same for chat
 * completions and the dialects (rpc/chat/dialect-methods.ts) on the Account and Gateway surfaces.
 */
export const USER_CHAT_ERRORS = {
  QUOTA_EXCEEDED: {},
  FORBIDDEN: {},
  INSUFFICIENT_CAPABILITY: {},
  UPSTREAM: {},
  TIMEOUT: {},
  BAD_GATEWAY: {},
  UNAVAILABLE: {},
  RATE_LIMITED: {},
  MODEL_NOT_AVAILABLE: {},
} as const;
export const ACCOUNT_CHAT_AUTH = { kinds: ["account_key"], scopes: ["intelligence"], scopeError: "INSUFFICIENT_CAPABILITY" } as const;
export const GATEWAY_CHAT_AUTH = { kinds: ["session", "gateway_key"] } as const;

/**
 * A chat completions body on the Account and Gateway surfaces, read tolerantly: every field the
 * client sent reaches a chat-format upstream, and the rest are translated (docs/dialects.md).
 */
const toolChat = (ctx: ChatContext, params: ChatBodyInput, surface: "account" | "gateway") =>
  userChat(ctx, chatToCanonical(params), params.stream_options?.include_usage === true, surface);

export const chatMethods = [
  chatDomain.method({
    name: "platform.chat.completions",
    summary:
      "Chat completion billed to the key's workspace (docs/interface.md 4.2); SSE chunks ending in [DONE] when stream is true. " +
      "Served while the balance, less what requests in flight hold, is above zero (402 otherwise); only model, " +
      "messages, stream, temperature, top_p and max_tokens are read.",
    input: PlatformChatBody,
    auth: { kinds: ["platform_key"], scopes: ["chat:write"] },
    output: ChatCompletionView,
    errors: {
      INSUFFICIENT_CREDITS: {},
      RATE_LIMITED: {},
      FORBIDDEN: {},
      UPSTREAM: {},
      BAD_GATEWAY: {},
      // docs/interface.md 7.2: an upstream timeout is a 502 here (rpc/surfaces.ts).
      TIMEOUT: { status: 502, message: "the model did not answer in time" },
      UNAVAILABLE: {},
      MODEL_NOT_AVAILABLE: {},
    },
    http: [{ surface: "platform", method: "POST", path: "/chat/completions" }],
    stream: { done: "[DONE]" },
    async handler(params, ctx) {
      const principal = principalOf(ctx);
      return holdAndRun(
        ctx,
        toChatRequest(params),
        false,
        undefined,
        (model, request, promptTokens) => {
          // The most the request can cost: the prompt plus max_tokens (or the output cap) at the
          // dearest deployment of the model and its fallbacks (docs/providers.md "Money").
          const output = ctx.deps.models.outputCap(model, promptTokens, request.max_tokens);
          return ctx.deps.money.admitPlatform(principal, {
            maxCost: ctx.deps.models.maxCost(model, promptTokens, request.max_tokens),
            tokens: promptTokens + output,
            inputCost: ctx.deps.models.inputCost(model, promptTokens),
            promptTokens,
          });
        },
        () => ctx.deps.money.requireCredits(principal),
        { surface: "platform", credits: true },
      );
    },
  }),

  chatDomain.method({
    name: "account.chat.completions",
    summary:
      "Chat completion on the account's plan allowance (docs/interface.md 4.1); needs scope intelligence. Every field of the chat " +
      "completions format is carried: forwarded to chat-format upstreams, translated for the others (docs/dialects.md).",
    input: ChatBody,
    auth: ACCOUNT_CHAT_AUTH,
    output: ChatCompletionView,
    errors: USER_CHAT_ERRORS,
    http: [{ surface: "account", method: "POST", path: "/chat/completions", queryParams: {} }],
    stream: { done: "[DONE]" },
    handler: (params, ctx) => toolChat(ctx, params, "account"),
  }),

  chatDomain.method({
    name: "gateway.chat.completions",
    summary:
      "Chat completion through the model router for a signed-in user or gateway key (docs/interface.md 4.4), on the user's plan " +
      "allowance. Every field of the chat completions format is carried: forwarded to chat-format upstreams, translated for " +
      "the others (docs/dialects.md).",
    input: ChatBody,
    auth: GATEWAY_CHAT_AUTH,
    output: ChatCompletionView,
    errors: USER_CHAT_ERRORS,
    http: [{ surface: "gateway", method: "POST", path: "/chat/completions", queryParams: {} }],
    stream: { done: "[DONE]" },
    handler: (params, ctx) => toolChat(ctx, params, "gateway"),
  }),
];
