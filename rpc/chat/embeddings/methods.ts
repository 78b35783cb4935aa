import { principalOf } from "../../auth.js";
import { ServiceError } from "../../errors.js";
import { SURFACES } from "../../surfaces.js";
import { chatDomain, type ChatContext } from "../deps.js";
import { ACCOUNT_CHAT_AUTH, GATEWAY_CHAT_AUTH, USER_CHAT_ERRORS } from "../methods.js";
import { priced, type RoutedModel } from "../model-router.js";
import { observeChat } from "../observe-chat.js";
import { usageOf } from "../tokens.js";
import type { Usage } from "../types.js";
import { countInputTokens } from "./embedder.js";
import { EmbeddingsBody, EmbeddingsView, toEmbeddingRequest, type EmbeddingsAnswer, type EmbeddingsBodyInput } from "./request.js";
import { encoded } from "./vectors.js";
import { allowanceOf } from "../../allow-list.js";

type UserSurface = "account" | "gateway";

/**
 * `POST /embeddings` on the Account and Gateway APIs (docs/embeddings.md), the way chat runs
 * there (rpc/chat/methods.ts `userChat`): the model must be an embedding model the caller's plan
 * may use; the plan allowance holds the inputs' tokens before any provider is called; the model
 * router picks the deployment, retries and falls back (rpc/chat/embeddings/router.ts); the hold
 * is settled once on the provider's usage (the gateway's count when it reports none), counted in
 * the usage reports by model, key and surface, and priced per 1,000 input tokens at the
 * answering deployment's `price.input` for the log line and metrics. The Platform API has no
 * embeddings (docs/interface.md 4.2).
 */
async function createEmbeddings(ctx: ChatContext, params: EmbeddingsBodyInput, surface: UserSurface): Promise<EmbeddingsAnswer> {
  const request = toEmbeddingRequest(params);
  const principal = principalOf(ctx);
  const planId = await ctx.deps.money.userPlan(principal.userId);
  const allowed = (await allowanceOf(ctx.deps, principal)).models;
  let model: RoutedModel;
  try {
    model = ctx.deps.models.resolve(request.model, allowed, planId, "embedding");
  } catch (error) {
    enterRouter(ctx);
    throw error;
  }
  const warning = ctx.deps.models.deprecation(model.id);
  if (warning && !SURFACES[ctx.surface].serviceHeaders) {
    if (ctx.logFields) ctx.logFields.modelWarning = warning.message;
  } else {
    ctx.deps.models.annotate(model.id, ctx.responseHeaders);
  }
  const counted = countInputTokens(request);
  const held = await ctx.deps.money.admitUser(principal.userId, planId, counted, counted);
  enterRouter(ctx);
  const observe = observeChat(ctx, model);
  if (ctx.logFields) ctx.logFields.embeddings = request.inputs.length;
  let answer: EmbeddingsAnswer;
  let usage: Usage;
  let cost: number;
  try {
    const { result, deployment } = await ctx.deps.embeddings.embed(model, request, ctx.signal, { traceparent: ctx.traceparent });
    observe.answered();
    if (result.vectors.length !== request.inputs.length) throw invalidVectors(model.id);
    const data = result.vectors.map((vector, index) => {
      const embedding = encoded(vector, request.encodingFormat);
      if (embedding === undefined) throw invalidVectors(model.id);
      return { object: "embedding" as const, index, embedding };
    });
    usage = usageOf(result.promptTokens ?? counted, 0);
    cost = priced(deployment.price, usage.prompt_tokens, 0);
    observe.metered(usage, result.promptTokens === undefined, cost);
    answer = { object: "list", data, model: model.id, usage: { prompt_tokens: usage.prompt_tokens, total_tokens: usage.total_tokens } };
  } catch (error) {
    await held.release();
    throw error;
  }
  const settle = async () => {
    await Promise.all([
      held.settle(usage, cost),
      ctx.deps.money.recordUsage(principal, { surface, credits: false, model: model.id }, usage, cost),
    ]);
  };
  // docs/crash-consistency.md "No charge without an answer": where the transport can tell, the
  // request is settled once its answer was handed to the socket; an answer the client never got
  // releases the hold and is not counted.
  if (!ctx.delivered) await settle().catch((error: unknown) => meteringFailed(ctx, error));
  else
    void ctx.delivered().then(
      (sent) => (sent ? settle() : held.release()).catch((error: unknown) => meteringFailed(ctx, error)),
      (error: unknown) => meteringFailed(ctx, error),
    );
  return answer;
}

/** The request reached the router: `X-Service-Request-Id`, as on every routed chat answer (docs/interface.md 4.2). */
function enterRouter(ctx: ChatContext): void {
  ctx.responseHeaders.set("X-Service-Request-Id", ctx.requestId);
}

function invalidVectors(id: string): ServiceError {
  return new ServiceError("BAD_GATEWAY", `The model provider sent an invalid response for ${id}`);
}

/** The usage happened; a storage failure here must not turn a delivered answer into an error. */
function meteringFailed(ctx: ChatContext, error: unknown): void {
  ctx.deps.log.error({ requestId: ctx.requestId, error: `metering failed: ${(error as Error).message}` });
}

const SUMMARY =
  "Embeddings in OpenAI's format (docs/embeddings.md): input is a string, an array of strings, an array of token ids or an " +
  `array of token id arrays (at most 2048); encoding_format float or base64 (little-endian float32); dimensions; other fields ` +
  "go to OpenAI-format upstreams as sent. The model must be an embedding model; usage draws on the plan allowance like chat.";

export const embeddingsMethods = [
  chatDomain.method({
    name: "account.embeddings.create",
    summary: `${SUMMARY} Needs scope intelligence.`,
    input: EmbeddingsBody,
    auth: ACCOUNT_CHAT_AUTH,
    output: EmbeddingsView,
    errors: USER_CHAT_ERRORS,
    http: [{ surface: "account", method: "POST", path: "/embeddings", queryParams: {} }],
    handler: (params, ctx) => createEmbeddings(ctx, params, "account"),
  }),

  chatDomain.method({
    name: "gateway.embeddings.create",
    summary: `${SUMMARY} For a signed-in user or gateway key.`,
    input: EmbeddingsBody,
    auth: GATEWAY_CHAT_AUTH,
    output: EmbeddingsView,
    errors: USER_CHAT_ERRORS,
    http: [{ surface: "gateway", method: "POST", path: "/embeddings", queryParams: {} }],
    handler: (params, ctx) => createEmbeddings(ctx, params, "gateway"),
  }),
];
