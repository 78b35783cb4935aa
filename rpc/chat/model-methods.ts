import * as v from "valibot";
import { principalOf, unauthorized } from "../auth.js";
import { ServiceError } from "../errors.js";
import { ModelEntry, ModelList } from "../views.js";
import type { Principal } from "../auth.js";
import { chatDomain, type ChatContext } from "./deps.js";
import { allowanceOf } from "../allow-list.js";

// docs/interface.md 2.1: the catalog is not filtered per key, so one id answers like the list it is in;
// a caller held to allow-lists sees only what they allow, in the list and by id (docs/access-control.md).
const ModelId = v.object({ model_id: v.pipe(v.string(), v.minLength(1), v.maxLength(256)) });

/** The catalog as this caller may see it. */
async function catalogOf(ctx: ChatContext) {
  return ctx.deps.models.list((await allowanceOf(ctx.deps, ctx.principal)).models);
}

async function findModel(ctx: ChatContext, id: string) {
  const entry = (await catalogOf(ctx)).find((candidate) => candidate.id === id);
  if (!entry) throw new ServiceError("NOT_FOUND", `The model '${id}' does not exist`);
  return entry;
}

/** docs/interface.md 5: an Account key reads the catalog with either scope; returns the user's plan status. */
async function accountPlan(ctx: ChatContext<Principal>) {
  const principal = ctx.principal;
  if (!principal.scopes.some((scope) => scope === "intelligence" || scope === "compute")) {
    throw new ServiceError("INSUFFICIENT_CAPABILITY", "This key lacks the intelligence or compute scope");
  }
  const user = await ctx.deps.users.get(principal.userId);
  if (!user) throw unauthorized("invalid");
  return ctx.deps.money.planStatus(user.id, user.plan);
}

export const modelMethods = [
  chatDomain.method({
    name: "platform.models.list",
    summary: "The model catalog (docs/interface.md 2.1); not filtered per key. 402 when the workspace has no credits.",
    input: v.object({}),
    auth: { kinds: ["platform_key"] },
    output: ModelList,
    errors: { INSUFFICIENT_CREDITS: {} },
    http: [{ surface: "platform", method: "GET", path: "/models" }],
    async handler(_params, ctx) {
      await ctx.deps.money.requireCredits(principalOf(ctx));
      return { object: "list", data: await catalogOf(ctx) };
    },
  }),

  chatDomain.method({
    name: "account.models.list",
    summary: "The model catalog with the account's current plan, its allowance and which models it unlocks (docs/interface.md 2.1, 4.1).",
    input: v.object({}),
    auth: { kinds: ["account_key"] },
    output: v.object({
      object: v.string(),
      plan: v.object({
        id: v.string(),
        name: v.string(),
        tokensPerWindow: v.number(),
        windowSeconds: v.number(),
        used: v.number(),
        remaining: v.number(),
      }),
      data: v.array(v.object({ ...ModelEntry.entries, available: v.boolean() })),
    }),
    errors: { INSUFFICIENT_CAPABILITY: {} },
    http: [{ surface: "account", method: "GET", path: "/models" }],
    async handler(_params, ctx) {
      const plan = await accountPlan(ctx);
      const usable = new Set(ctx.deps.models.usableIds(plan.id));
      return {
        object: "list",
        plan,
        data: (await catalogOf(ctx)).map((entry) => ({ ...entry, available: usable.has(entry.id) })),
      };
    },
  }),

  chatDomain.method({
    name: "gateway.models.list",
    summary: "The runtime model list of the model router (docs/interface.md 4.4).",
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key"] },
    output: ModelList,
    http: [{ surface: "gateway", method: "GET", path: "/models" }],
    async handler(_params, ctx) {
      return { object: "list", data: await catalogOf(ctx) };
    },
  }),

  // What `openai.models.retrieve(id)` calls, with the list's credential and 402 rules.
  chatDomain.method({
    name: "platform.models.get",
    summary:
      "One model of the catalog (docs/interface.md 2.1), as `GET /models` lists it; 404 for an unknown id, 402 when the workspace has no credits.",
    input: ModelId,
    auth: { kinds: ["platform_key"] },
    output: ModelEntry,
    errors: { INSUFFICIENT_CREDITS: {}, NOT_FOUND: {} },
    http: [{ surface: "platform", method: "GET", path: "/models/:model_id" }],
    async handler(params, ctx) {
      await ctx.deps.money.requireCredits(principalOf(ctx));
      return findModel(ctx, params.model_id);
    },
  }),

  chatDomain.method({
    name: "account.models.get",
    summary: "One model of the catalog with `available`: whether the account's current plan unlocks it; 404 for an unknown id.",
    input: ModelId,
    auth: { kinds: ["account_key"] },
    output: v.object({ ...ModelEntry.entries, available: v.boolean() }),
    errors: { NOT_FOUND: {}, INSUFFICIENT_CAPABILITY: {} },
    http: [{ surface: "account", method: "GET", path: "/models/:model_id" }],
    async handler(params, ctx) {
      const plan = await accountPlan(ctx);
      const entry = await findModel(ctx, params.model_id);
      return { ...entry, available: ctx.deps.models.usableIds(plan.id).includes(entry.id) };
    },
  }),

  chatDomain.method({
    name: "gateway.models.get",
    summary: "One model of the model router's list; 404 for an unknown id.",
    input: ModelId,
    auth: { kinds: ["session", "gateway_key"] },
    output: ModelEntry,
    errors: { NOT_FOUND: {} },
    http: [{ surface: "gateway", method: "GET", path: "/models/:model_id" }],
    async handler(params, ctx) {
      return await findModel(ctx, params.model_id);
    },
  }),
];
