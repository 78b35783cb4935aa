import * as v from "valibot";
import { defineMethod } from "../define.js";
import { principalOf, unauthorized } from "../auth.js";
import { ServiceError } from "../errors.js";
import { requireCredits } from "./key-limits.js";
import { ModelEntry, ModelList } from "../views.js";

export const modelMethods = [
  defineMethod({
    name: "platform.models.list",
    summary: "The model catalog (spec 2.1); not filtered per key. 402 when the workspace has no credits.",
    input: v.object({}),
    auth: { kinds: ["platform_key"] },
    output: ModelList,
    errors: ["INSUFFICIENT_CREDITS"],
    http: [{ surface: "platform", method: "GET", path: "/models" }],
    async handler(_params, ctx) {
      await requireCredits(ctx.services, principalOf(ctx));
      return { object: "list", data: ctx.services.models.list() };
    },
  }),

  defineMethod({
    name: "account.models.list",
    summary: "The model catalog with the account's current plan, its allowance and which models it unlocks (spec 2.1, 4.1).",
    input: v.object({}),
    auth: { kinds: ["account_key"] },
    output: v.object({ object: v.string(), plan: v.object({ id: v.string(), name: v.string(), tokensPerWindow: v.number(), windowSeconds: v.number(), used: v.number(), remaining: v.number() }), data: v.array(v.object({ ...ModelEntry.entries, available: v.boolean() })) }),
    errors: ["INSUFFICIENT_CAPABILITY"],
    http: [{ surface: "account", method: "GET", path: "/models" }],
    async handler(_params, ctx) {
      const principal = principalOf(ctx);
      // spec 5: the catalog is open to either scope.
      if (!principal.scopes.some((scope) => scope === "intelligence" || scope === "compute")) {
        throw new ServiceError("INSUFFICIENT_CAPABILITY", "This key lacks the intelligence or compute scope");
      }
      const user = await ctx.services.users.get(principal.userId);
      if (!user) throw unauthorized("invalid");
      const plan = await ctx.services.allowance.status(user.id, user.plan);
      const usable = new Set(ctx.services.models.usableIds(plan.id));
      return {
        object: "list",
        plan,
        data: ctx.services.models.list().map((entry) => ({ ...entry, available: usable.has(entry.id) })),
      };
    },
  }),

  defineMethod({
    name: "gateway.models.list",
    summary: "The runtime model list of the model router (spec 4.4).",
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key"] },
    output: ModelList,
    http: [{ surface: "gateway", method: "GET", path: "/models" }],
    handler(_params, ctx) {
      return { object: "list", data: ctx.services.models.list() };
    },
  }),
];
