import * as v from "valibot";
import { isAsyncIterable } from "../define.js";
import { principalOf } from "../auth.js";
import { chatDomain, type ChatContext } from "./deps.js";
import { ACCOUNT_CHAT_AUTH, GATEWAY_CHAT_AUTH, USER_CHAT_ERRORS, userChat } from "./methods.js";
import { ResponsesBody, responseEvents, responsesToChat, toResponse, type ResponsesBodyInput } from "./dialects/responses.js";
import {
  CountTokensBody,
  MessagesBody,
  countInputTokens,
  messageEvents,
  messagesToChat,
  toMessage,
  type CountTokensInput,
  type MessagesBodyInput,
} from "./dialects/messages.js";
import { retold } from "./dialects/stream.js";
import { allowanceOf } from "../allow-list.js";

/**
 * The OpenAI Responses and Anthropic Messages dialects on the Account and Gateway surfaces
 * (docs/dialects.md): each request is read into the canonical chat request and runs the one
 * chat path (rpc/chat/methods.ts `userChat`: models, deployments, retries, fallbacks, plan
 * allowance holds, stream places, metering, usage reports and the log line), then its answer is
 * retold in the dialect. The Messages routes speak Anthropic's dialect (rpc/surfaces.ts DIALECTS):
 * `x-api-key` as well as a bearer token, `anthropic-version`, Anthropic's error envelope.
 */

const Item = v.looseObject({ type: v.string() });

const ResponseView = v.looseObject({
  id: v.string(),
  object: v.string(),
  created_at: v.number(),
  status: v.string(),
  model: v.string(),
  output: v.array(Item),
  store: v.boolean(),
  usage: v.nullable(v.looseObject({ input_tokens: v.number(), output_tokens: v.number(), total_tokens: v.number() })),
});

const MessageView = v.looseObject({
  id: v.string(),
  type: v.string(),
  role: v.string(),
  model: v.string(),
  content: v.array(Item),
  stop_reason: v.nullable(v.string()),
  usage: v.looseObject({ input_tokens: v.number(), output_tokens: v.number() }),
});

const CountTokensView = v.object({ input_tokens: v.number() });

/** The Messages routes answer 503 as Anthropic's 529 `overloaded_error` (rpc/surfaces.ts DIALECTS). */
const MESSAGES_ERRORS = { ...USER_CHAT_ERRORS, UNAVAILABLE: { status: 529, message: "overloaded: no model can answer now" } } as const;

/** `anthropic-version` and `anthropic-beta` are read as params, for an Anthropic upstream (docs/dialects.md "Messages"). */
const ANTHROPIC_HEADERS = { "anthropic-version": "anthropic_version", "anthropic-beta": "anthropic_beta" } as const;
/** The Anthropic SDK's `?beta=true` on its beta calls (Claude Code's), forwarded to an Anthropic upstream; no other query is read. */
const ANTHROPIC_QUERY = { beta: "anthropic_beta_query" } as const;

type UserSurface = "account" | "gateway";

async function createResponse(ctx: ChatContext, params: ResponsesBodyInput, surface: UserSurface) {
  const { request, names } = responsesToChat(params);
  if (ctx.logFields) ctx.logFields.dialect = "responses";
  const answer = await userChat(ctx, request, true, surface);
  if (isAsyncIterable(answer)) return retold(answer, (chunks) => responseEvents(params, chunks, names));
  return toResponse(params, answer, names);
}

async function createMessage(ctx: ChatContext, params: MessagesBodyInput, surface: UserSurface) {
  const request = messagesToChat(params);
  if (ctx.logFields) ctx.logFields.dialect = "messages";
  const answer = await userChat(ctx, request, true, surface);
  if (isAsyncIterable(answer)) return retold(answer, (chunks) => messageEvents(request, chunks));
  return toMessage(answer, request);
}

/**
 * The request's input tokens as the service counts them; the model must be one the caller may
 * use (403 with the usable ids otherwise), nothing runs and nothing is metered.
 */
async function countTokens(ctx: ChatContext, params: CountTokensInput) {
  const { request, inputTokens } = countInputTokens(params);
  const plan = await ctx.deps.money.userPlan(principalOf(ctx).userId);
  ctx.deps.models.resolve(request.model, (await allowanceOf(ctx.deps, ctx.principal)).models, plan);
  return { input_tokens: inputTokens };
}

const RESPONSES_SUMMARY =
  "An OpenAI Responses API request (docs/dialects.md), read tolerantly: forwarded as it is to an upstream of the Responses " +
  "API, translated for the others (function, namespace and custom tools, text.format, reasoning.effort); typed SSE events " +
  "when stream is true. Translated, nothing is stored: store is answered false; previous_response_id, conversation and " +
  "item_reference are 400.";
const MESSAGES_SUMMARY =
  "An Anthropic Messages API request (docs/dialects.md), read tolerantly: forwarded as it is to an Anthropic model, " +
  "translated for the others (system turns, tools, thinking, output_config); its SSE events when stream is true. " +
  "Credentials in x-api-key or Authorization: Bearer; errors in Anthropic's envelope (529 when no model can answer now).";
const COUNT_SUMMARY =
  "The input tokens of a Messages API request as the service counts them (docs/dialects.md): the count its holds use, plus " +
  "the tool definitions; no model runs and nothing is metered.";

export const dialectMethods = [
  chatDomain.method({
    name: "account.responses.create",
    summary: `${RESPONSES_SUMMARY} On the account's plan allowance; needs scope intelligence.`,
    input: ResponsesBody,
    auth: ACCOUNT_CHAT_AUTH,
    output: ResponseView,
    errors: USER_CHAT_ERRORS,
    http: [{ surface: "account", method: "POST", path: "/responses", queryParams: {} }],
    stream: { named: true },
    handler: (params, ctx) => createResponse(ctx, params, "account"),
  }),

  chatDomain.method({
    name: "gateway.responses.create",
    summary: `${RESPONSES_SUMMARY} On the user's plan allowance.`,
    input: ResponsesBody,
    auth: GATEWAY_CHAT_AUTH,
    output: ResponseView,
    errors: USER_CHAT_ERRORS,
    http: [{ surface: "gateway", method: "POST", path: "/responses", queryParams: {} }],
    stream: { named: true },
    handler: (params, ctx) => createResponse(ctx, params, "gateway"),
  }),

  chatDomain.method({
    name: "account.messages.create",
    summary: `${MESSAGES_SUMMARY} On the account's plan allowance; needs scope intelligence.`,
    input: MessagesBody,
    auth: ACCOUNT_CHAT_AUTH,
    output: MessageView,
    errors: MESSAGES_ERRORS,
    http: [
      {
        surface: "account",
        method: "POST",
        path: "/messages",
        dialect: "anthropic",
        headerParams: ANTHROPIC_HEADERS,
        queryParams: ANTHROPIC_QUERY,
      },
    ],
    stream: { named: true },
    handler: (params, ctx) => createMessage(ctx, params, "account"),
  }),

  chatDomain.method({
    name: "gateway.messages.create",
    summary: `${MESSAGES_SUMMARY} On the user's plan allowance.`,
    input: MessagesBody,
    auth: GATEWAY_CHAT_AUTH,
    output: MessageView,
    errors: MESSAGES_ERRORS,
    http: [
      {
        surface: "gateway",
        method: "POST",
        path: "/messages",
        dialect: "anthropic",
        headerParams: ANTHROPIC_HEADERS,
        queryParams: ANTHROPIC_QUERY,
      },
    ],
    stream: { named: true },
    handler: (params, ctx) => createMessage(ctx, params, "gateway"),
  }),

  chatDomain.method({
    name: "account.messages.count_tokens",
    summary: `${COUNT_SUMMARY} Needs scope intelligence.`,
    input: CountTokensBody,
    auth: ACCOUNT_CHAT_AUTH,
    output: CountTokensView,
    errors: { FORBIDDEN: {}, MODEL_NOT_AVAILABLE: {} },
    http: [
      {
        surface: "account",
        method: "POST",
        path: "/messages/count_tokens",
        dialect: "anthropic",
        headerParams: ANTHROPIC_HEADERS,
        queryParams: ANTHROPIC_QUERY,
      },
    ],
    handler: (params, ctx) => countTokens(ctx, params),
  }),

  chatDomain.method({
    name: "gateway.messages.count_tokens",
    summary: COUNT_SUMMARY,
    input: CountTokensBody,
    auth: GATEWAY_CHAT_AUTH,
    output: CountTokensView,
    errors: { FORBIDDEN: {}, MODEL_NOT_AVAILABLE: {} },
    http: [
      {
        surface: "gateway",
        method: "POST",
        path: "/messages/count_tokens",
        dialect: "anthropic",
        headerParams: ANTHROPIC_HEADERS,
        queryParams: ANTHROPIC_QUERY,
      },
    ],
    handler: (params, ctx) => countTokens(ctx, params),
  }),
];
