import * as v from "valibot";
import { tenantOrPersonal, type Role } from "../tenants/access.js";
import { principalOf } from "../auth.js";
import { ServiceError } from "../errors.js";
import { newId, nowIso } from "../../storage/ids.js";
import type { ToolPlan, ToolPlanStep } from "../../storage/repos/tool-plans.js";
import { routerFor } from "./routing/tool-router.js";
import type { RouteScope } from "./routing/tool-router.js";
import type { Ranked } from "./routing/ranker.js";
import { makePlan, plannerModel, type DraftStep } from "./routing/planner.js";
import { checkSteps, executePlan } from "./routing/executor.js";
import { extractArgs } from "./routing/args.js";
import { vmNotConnected } from "./sources.js";
import { ToolPlanView, ToolResultView } from "../views.js";
import { allowanceOf } from "../allow-list.js";
import { toolsDomain, type ToolsContext } from "./deps.js";

const input = v.pipe(
  v.string("input must be a string"),
  v.trim(),
  v.minLength(1, "input is required"),
  v.maxLength(10_000, "input is at most 10000 characters"),
);
const tenantId = v.optional(v.pipe(v.string("tenantId must be a string"), v.minLength(1), v.maxLength(128)));
const preferredMcp = v.optional(v.pipe(v.string("preferredMcp must be a string"), v.maxLength(128)));
const args = v.record(v.string(), v.unknown(), "args must be an object");

/**
 * The tenant whose tools a request may route to: the caller's own, or one they are a member
 * of (with at least `need`) when `tenantId` names it. A non-member gets the same 404 as for a
 * missing tenant (rpc/tenants/access.ts).
 */
async function scopeOf(ctx: ToolsContext, requested?: string, need: Role = "viewer"): Promise<RouteScope> {
  const principal = principalOf(ctx);
  const tenantId = (await tenantOrPersonal(ctx.deps, principal, requested, need)).id;
  // The caller's tool allow-lists narrow what may be routed, planned and run (docs/access-control.md).
  return { tenantId, allowed: (await allowanceOf(ctx.deps, principal)).tools };
}

const router = (ctx: ToolsContext) => routerFor(ctx.deps);

function choice(entry: Ranked) {
  return { server: entry.tool.server, tool: entry.tool.name, score: entry.score };
}

function toSteps(drafts: DraftStep[]): ToolPlanStep[] {
  return drafts.map((draft, index) => ({
    index,
    ...draft,
    status: "pending",
    result: null,
    error: null,
    durationMs: null,
    startedAt: null,
  }));
}

function newPlan(fields: Pick<ToolPlan, "input" | "steps" | "planner" | "unmatched" | "createdBy"> & Partial<ToolPlan>): ToolPlan {
  const now = nowIso();
  return {
    id: newId("plan"),
    createdAt: now,
    updatedAt: now,
    status: "planned",
    failedStep: null,
    error: null,
    startedAt: null,
    finishedAt: null,
    ...fields,
  };
}

/** Tool routing, planning, execution and ask (docs/interface.md 4.4 "Tool catalog and routing"; docs/routing.md). */
export const routingMethods = [
  toolsDomain.method({
    name: "mcp.router.tools",
    summary:
      "The tools the router can choose from for the caller, each with its server (`builtin`, an upstream MCP server's name, or `vm:<vmId>`).",
    input: v.object({ tenantId }),
    auth: { kinds: ["session", "gateway_key"] },
    output: v.object({
      tools: v.array(v.object({ server: v.string(), name: v.string(), tool: v.string(), description: v.string(), category: v.string() })),
      count: v.number(),
    }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/mcp/router/tools" }],
    async handler(params, ctx) {
      const tools = await router(ctx).tools(await scopeOf(ctx, params.tenantId));
      return {
        tools: tools.map((tool) => ({
          server: tool.server,
          name: tool.name,
          tool: tool.localName,
          description: tool.description,
          category: tool.category,
        })),
        count: tools.length,
      };
    },
  }),

  toolsDomain.method({
    name: "mcp.route",
    summary:
      "The best tool for a request in words (BM25 over tool names, descriptions, categories and argument schemas) " +
      "with the runners-up. `preferredMcp` wins when that server has any match. No match: 200 with `tool: null`.",
    input: v.object({ input, tenantId, preferredMcp }),
    auth: { kinds: ["session", "gateway_key"] },
    output: v.object({
      server: v.nullable(v.string()),
      tool: v.nullable(v.string()),
      score: v.number(),
      alternatives: v.array(v.unknown()),
      reason: v.optional(v.string()),
    }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: "/mcp/route" }],
    async handler(params, ctx) {
      const routed = await router(ctx).route(params.input, await scopeOf(ctx, params.tenantId), {
        preferredMcp: params.preferredMcp || undefined,
      });
      if (!routed.best) return { server: null, tool: null, score: 0, alternatives: [], reason: routed.reason };
      return { ...choice(routed.best), alternatives: routed.alternatives.map(choice), reason: routed.reason };
    },
  }),

  toolsDomain.method({
    name: "mcp.plan",
    summary:
      "Plan the tool calls a request needs and store the plan. With a planner model (ROUTER_MODEL) the model " +
      "proposes the steps, checked strictly against the catalog and the tools' schemas; otherwise, or when its " +
      "answer is invalid, the request is split into clauses and each routed.",
    input: v.object({
      input,
      tenantId,
      preferredMcp,
      maxSteps: v.optional(
        v.pipe(
          v.number("maxSteps must be a number"),
          v.integer("maxSteps must be an integer"),
          v.minValue(1, "maxSteps is at least 1"),
          v.maxValue(100),
        ),
      ),
    }),
    auth: { kinds: ["session", "gateway_key"] },
    output: ToolPlanView,
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: "/mcp/plan", status: 201 }],
    async handler(params, ctx) {
      const { config, models, toolPlans } = ctx.deps;
      const scope = await scopeOf(ctx, params.tenantId, "member");
      const maxSteps = Math.min(params.maxSteps ?? config.ROUTER_MAX_STEPS, config.ROUTER_MAX_STEPS);
      const preferred = params.preferredMcp || undefined;
      const draft = await makePlan(router(ctx), plannerModel(models, config.ROUTER_MODEL), params.input, scope, {
        preferredMcp: preferred,
        maxSteps,
        signal: ctx.signal,
      });
      const plan = newPlan({
        input: params.input,
        steps: toSteps(draft.steps),
        planner: draft.planner,
        unmatched: draft.unmatched,
        createdBy: principalOf(ctx).userId,
        tenantId: scope.tenantId,
        ...(preferred ? { preferredMcp: preferred } : {}),
      });
      return toolPlans.put(plan);
    },
  }),

  toolsDomain.method({
    name: "mcp.plans.list",
    summary: "The caller's tool plans, newest first.",
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key"] },
    output: v.object({ plans: v.array(ToolPlanView), count: v.number() }),
    http: [{ surface: "gateway", method: "GET", path: "/mcp/plans" }],
    async handler(_params, ctx) {
      const plans = await ctx.deps.toolPlans.list(principalOf(ctx).userId);
      return { plans, count: plans.length };
    },
  }),

  toolsDomain.method({
    name: "mcp.plans.get",
    summary: "One of the caller's tool plans with each step's result; another user's plan is 404 like a missing one.",
    input: v.object({ id: v.pipe(v.string(), v.minLength(1), v.maxLength(128)) }),
    auth: { kinds: ["session", "gateway_key"] },
    output: ToolPlanView,
    errors: { NOT_FOUND: {} },
    http: [{ surface: "gateway", method: "GET", path: "/mcp/plans/:id" }],
    async handler(params, ctx) {
      const plan = await ctx.deps.toolPlans.get(principalOf(ctx).userId, params.id);
      if (!plan) throw new ServiceError("NOT_FOUND", `Unknown plan: ${params.id}`);
      return plan;
    },
  }),

  toolsDomain.method({
    name: "mcp.execute",
    summary:
      "Run a stored plan (`planId`) or the given `steps` step by step through the catalog. Every step's args are " +
      "checked against its tool's schema before anything runs (400); each step's result, error and duration are " +
      "stored in the plan, which ends `completed` or `failed` at the first failing step.",
    input: v.pipe(
      v.object({
        planId: v.optional(v.pipe(v.string("planId must be a string"), v.minLength(1), v.maxLength(128))),
        steps: v.optional(
          v.pipe(
            v.array(
              v.object({
                tool: v.pipe(v.string("tool must be a string"), v.minLength(1, "tool is required"), v.maxLength(256)),
                args: v.optional(args, {}),
                reason: v.optional(v.pipe(v.string(), v.maxLength(2000))),
              }),
              "steps must be an array",
            ),
            v.minLength(1, "steps must not be empty"),
            v.maxLength(100, "at most 100 steps"),
          ),
        ),
        tenantId,
      }),
      v.check((body) => (body.planId === undefined) !== (body.steps === undefined), "give either planId or steps"),
    ),
    auth: { kinds: ["session", "gateway_key"] },
    output: ToolPlanView,
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, CONFLICT: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: "/mcp/execute" }],
    async handler(params, ctx) {
      const { toolPlans } = ctx.deps;
      const userId = principalOf(ctx).userId;
      let plan: ToolPlan;
      if (params.planId) {
        // The stored credentials opened for the run; the answer below is redacted again.
        const stored = await toolPlans.forRun(userId, params.planId);
        if (!stored) throw new ServiceError("NOT_FOUND", `Unknown plan: ${params.planId}`);
        plan = stored;
      } else {
        const scope = await scopeOf(ctx, params.tenantId, "member");
        const tools = new Map((await router(ctx).tools(scope)).map((tool) => [tool.name, tool]));
        const steps = params.steps!.map((step) => ({
          server: tools.get(step.tool)?.server ?? "unknown",
          tool: step.tool,
          args: step.args,
          reason: step.reason ?? "Given by the caller",
        }));
        // Checked before the plan is stored: an invalid request leaves nothing behind.
        await checkSteps(router(ctx), steps, scope);
        plan = newPlan({
          input: "",
          steps: toSteps(steps),
          planner: { kind: "caller" },
          unmatched: [],
          createdBy: userId,
          tenantId: scope.tenantId,
        });
        await toolPlans.put(plan);
      }
      // A plan runs with its tenant's tools only while the caller is still a member there.
      const scope = await scopeOf(ctx, plan.tenantId, "member");
      // Stored with credential-like values sealed, shown redacted (docs/routing.md).
      return toolPlans.redacted(await executePlan(ctx.deps, toolPlans, router(ctx), plan, scope, ctx.signal));
    },
  }),

  toolsDomain.method({
    name: "mcp.ask",
    summary:
      "Route a request to one tool and propose the call; nothing runs unless `approve` is true. `vmId` limits the " +
      "choice to that VM's tools and runs the call there; `toolInput` replaces the arguments read from the request.",
    input: v.object({
      input,
      preferredMcp,
      vmId: v.optional(v.pipe(v.string("vmId must be a string"), v.minLength(1), v.maxLength(64))),
      approve: v.optional(v.boolean("approve must be a boolean"), false),
      toolInput: v.optional(args),
      tenantId,
    }),
    auth: { kinds: ["session", "gateway_key"] },
    output: v.object({ executed: v.boolean(), result: v.optional(ToolResultView) }),
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, FORBIDDEN: {}, UNAVAILABLE: {}, TIMEOUT: {}, BAD_GATEWAY: {} },
    http: [{ surface: "gateway", method: "POST", path: "/mcp/ask" }],
    async handler(params, ctx) {
      let scope = await scopeOf(ctx, params.tenantId, params.approve ? "member" : "viewer");
      let onlyServer: string | undefined;
      if (params.vmId) {
        const record = await ctx.deps.vms.find(params.vmId);
        // Another tenant's VM answers exactly like a missing one (bridge/tools/execute does the same).
        if (!record) throw vmNotConnected(params.vmId);
        try {
          scope = await scopeOf(ctx, record.tenantId, params.approve ? "member" : "viewer");
        } catch {
          throw vmNotConnected(params.vmId);
        }
        onlyServer = `vm:${record.vmId}`;
      }
      const routed = await router(ctx).route(params.input, scope, {
        preferredMcp: params.preferredMcp || undefined,
        onlyServer,
        alternatives: 2,
      });
      if (!routed.best) return { proposed: null, executed: false, reason: routed.reason };
      const { tool, score } = routed.best;
      const extracted = extractArgs(tool.inputSchema, params.input);
      const callArgs = params.toolInput ?? extracted.args;
      const proposed = {
        server: tool.server,
        tool: tool.name,
        args: callArgs,
        score,
        ...(params.toolInput || extracted.missing.length === 0 ? {} : { missing: extracted.missing }),
      };
      const base = { proposed, alternatives: routed.alternatives.map(choice), reason: routed.reason };
      if (!params.approve) return { ...base, executed: false };
      await checkSteps(router(ctx), [{ tool: tool.name, args: callArgs }], scope);
      const result = await ctx.deps.catalog.call(tool.name, callArgs, {
        timeoutMs: ctx.deps.config.GATEWAY_TIMEOUT_SECONDS * 1000,
        signal: ctx.signal,
        tenantId: scope.tenantId,
        ...(params.vmId ? { vmId: params.vmId } : {}),
      });
      return { ...base, executed: true, result };
    },
  }),
];
