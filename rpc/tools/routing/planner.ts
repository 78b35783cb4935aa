import * as v from "valibot";
import type { ModelRouter, RoutedModel } from "../../chat/model-router.js";
import { toServiceError } from "../../errors.js";
import { schemaIssues } from "../validate-args.js";
import { extractArgs } from "./args.js";
import { splitClauses } from "./clauses.js";
import type { RoutableTool } from "./ranker.js";
import type { RouteScope, ToolRouter } from "./tool-router.js";
import type { ToolPlanStep } from "../../../storage/repos/tool-plans.js";
import { UNRESTRICTED } from "../../allow-list.js";

/** A step before it is stored: what the plan will run, without the execution record. */
export type DraftStep = Pick<ToolPlanStep, "server" | "tool" | "args" | "reason" | "score" | "clause" | "missing">;

export interface Draft {
  steps: DraftStep[];
  planner: { kind: "model" | "ranking"; model?: string; fallback?: string };
  unmatched: string[];
}

export interface PlanOptions {
  preferredMcp?: string;
  maxSteps: number;
  signal: AbortSignal;
}

/**
 * The model that plans (ROUTER_MODEL): `none` turns model planning off; unset picks the first
 * public OpenAI-compatible model (the echo provider only repeats its input, so it is never
 * picked on its own); an id names one model.
 */
export function plannerModel(models: ModelRouter, setting: string | undefined): RoutedModel | undefined {
  if (setting === "none") return undefined;
  if (setting) {
    try {
      return models.resolve(setting, UNRESTRICTED.models);
    } catch {
      return undefined;
    }
  }
  for (const id of models.usableIds()) {
    const model = models.resolve(id, UNRESTRICTED.models);
    if (model.deployments.some((deployment) => deployment.config.provider !== "echo")) return model;
  }
  return undefined;
}

/**
 * A plan from the ranking alone: the request is split into clauses ("then", "and then", ";",
 * "finally", new lines), each clause routed to its best tool, and the arguments the tool's
 * schema asks for read from the clause where possible (rpc/tools/routing/args.ts).
 */
export async function rankingPlan(
  router: ToolRouter,
  input: string,
  scope: RouteScope,
  options: Omit<PlanOptions, "signal">,
  fallback?: string,
): Promise<Draft> {
  const clauses = splitClauses(input);
  if (clauses.length === 0) clauses.push(input.trim());
  const steps: DraftStep[] = [];
  const unmatched: string[] = [];
  for (const clause of clauses) {
    if (steps.length >= options.maxSteps) {
      unmatched.push(clause);
      continue;
    }
    const routed = await router.route(clause, scope, { preferredMcp: options.preferredMcp, alternatives: 0 });
    if (!routed.best) {
      unmatched.push(clause);
      continue;
    }
    const { tool, score } = routed.best;
    const { args, missing } = extractArgs(tool.inputSchema, clause);
    steps.push({
      server: tool.server,
      tool: tool.name,
      args,
      reason: routed.reason,
      score,
      clause,
      ...(missing.length ? { missing } : {}),
    });
  }
  return { steps, planner: { kind: "ranking", ...(fallback ? { fallback } : {}) }, unmatched };
}

/** Most tools described to the planner model in one prompt. */
const MAX_OFFERED = 32;

/**
 * The tools offered to the model: every visible tool when they fit in one prompt, else the
 * best for the whole request and for each clause, topped up in catalog order.
 */
async function candidates(router: ToolRouter, input: string, scope: RouteScope): Promise<RoutableTool[]> {
  const all = await router.tools(scope);
  if (all.length <= MAX_OFFERED) return all;
  const picked = new Map<string, RoutableTool>();
  for (const ranked of await router.rank(input, scope, { limit: 20 })) picked.set(ranked.tool.name, ranked.tool);
  for (const clause of splitClauses(input)) {
    for (const ranked of await router.rank(clause, scope, { limit: 5 })) picked.set(ranked.tool.name, ranked.tool);
  }
  for (const tool of all) {
    if (picked.size >= MAX_OFFERED) break;
    picked.set(tool.name, tool);
  }
  return [...picked.values()].slice(0, MAX_OFFERED);
}

const ModelStep = v.object({
  tool: v.pipe(v.string(), v.minLength(1)),
  server: v.optional(v.string()),
  args: v.optional(v.record(v.string(), v.unknown()), {}),
  reason: v.optional(v.string(), ""),
});

function prompt(tools: RoutableTool[], maxSteps: number, preferredMcp: string | undefined): string {
  const catalog = tools.map((tool) => ({
    name: tool.name,
    server: tool.server,
    description: tool.description,
    inputSchema: tool.inputSchema,
  }));
  return [
    "You plan tool calls for a request. Use ONLY tools from this catalog, by their exact `name`:",
    JSON.stringify(catalog),
    `Answer with JSON only, no prose: {"steps": [{"tool": "<name>", "args": {<arguments matching the tool's inputSchema>}, "reason": "<why>"}]}.`,
    `At most ${maxSteps} steps, in the order they must run. Use {"steps": []} when no tool fits.`,
    preferredMcp ? `Prefer tools whose server is "${preferredMcp}" when they fit.` : "",
  ]
    .filter(Boolean)
    .join("\n");
}

/** The JSON object in a model's answer: bare, or in a ```json fence, or surrounded by prose. */
function jsonOf(text: string): unknown {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/i.exec(text);
  const body = (fenced ? fenced[1]! : text).trim();
  try {
    return JSON.parse(body);
  } catch {
    const start = body.indexOf("{");
    const end = body.lastIndexOf("}");
    if (start < 0 || end <= start) throw new Error("the answer holds no JSON object");
    return JSON.parse(body.slice(start, end + 1));
  }
}

/**
 * Checks a model's plan strictly: a `steps` array of at most `maxSteps`, every tool one of
 * the offered catalog tools, every `args` valid against that tool's JSON Schema. Throws with
 * the first problem; the caller then falls back to the ranking.
 */
export function parseModelPlan(text: string, tools: RoutableTool[], maxSteps: number): DraftStep[] {
  const raw = jsonOf(text);
  const parsed = v.safeParse(v.object({ steps: v.array(ModelStep) }), raw);
  if (!parsed.success)
    throw new Error(
      `the plan is not {steps: [{tool, args, reason}]}: ${v.getDotPath(parsed.issues[0]) ?? "(root)"} ${parsed.issues[0].message}`,
    );
  const { steps } = parsed.output;
  if (steps.length === 0) throw new Error("the model proposed no steps");
  if (steps.length > maxSteps) throw new Error(`the model proposed ${steps.length} steps; at most ${maxSteps} are allowed`);
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  return steps.map((step, index) => {
    const tool = byName.get(step.tool) ?? tools.find((candidate) => candidate.localName === step.tool && candidate.server === step.server);
    if (!tool) throw new Error(`step ${index}: ${step.tool} is not one of the offered tools`);
    const issues = schemaIssues(tool.inputSchema, step.args);
    if (issues.length)
      throw new Error(`step ${index}: invalid arguments for ${tool.name}: ${issues[0]!.path || "(root)"} ${issues[0]!.message}`);
    return { server: tool.server, tool: tool.name, args: step.args, reason: step.reason || `Chosen by the planner model` };
  });
}

/**
 * A plan for `input`: asked of the planner model when one is configured (its JSON checked by
 * `parseModelPlan`), otherwise — or when the model fails or answers something invalid — made
 * from the ranking, with the reason for the fallback recorded in `planner.fallback`.
 */
export async function makePlan(
  router: ToolRouter,
  model: RoutedModel | undefined,
  input: string,
  scope: RouteScope,
  options: PlanOptions,
): Promise<Draft> {
  if (!model) return rankingPlan(router, input, scope, options);
  const tools = await candidates(router, input, scope);
  if (tools.length === 0) return rankingPlan(router, input, scope, options, "no tools are available to plan with");
  let text: string;
  try {
    const result = await model.provider.complete(
      {
        model: model.id,
        messages: [
          { role: "system", content: prompt(tools, options.maxSteps, options.preferredMcp) },
          { role: "user", content: input },
        ],
        stream: false,
        temperature: 0,
      },
      options.signal,
    );
    if (result.kind !== "completion") throw new Error("the model streamed its answer");
    const content = result.completion.choices[0]?.message.content;
    if (typeof content !== "string" || !content.trim()) throw new Error("the model's answer is empty");
    text = content;
  } catch (error) {
    return rankingPlan(router, input, scope, options, `model ${model.id} failed: ${toServiceError(error).message}`);
  }
  try {
    const steps = parseModelPlan(text, tools, options.maxSteps);
    return { steps, planner: { kind: "model", model: model.id }, unmatched: [] };
  } catch (error) {
    return rankingPlan(router, input, scope, options, `model ${model.id} answered an invalid plan: ${(error as Error).message}`);
  }
}
