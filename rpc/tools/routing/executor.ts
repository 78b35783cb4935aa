import { ServiceError, toServiceError } from "../../errors.js";
import type { ToolPlan, ToolPlanStep, ToolPlansRepo } from "../../../storage/repos/tool-plans.js";
import { nowIso } from "../../../storage/ids.js";
import type { ToolResult } from "../types.js";
import { schemaIssues } from "../validate-args.js";
import type { RouteScope, ToolRouter } from "./tool-router.js";
import { allowedBy } from "../../allow-list.js";
import type { ToolsDeps } from "../deps.js";

/** The text of a tool result, for an error message. */
function resultText(result: ToolResult): string {
  return result.content.map((part) => (part.type === "text" ? (part.text ?? "") : JSON.stringify(part))).join("\n");
}

/**
 * Checks every step before anything runs: the tool must be routable for the caller (404
 * otherwise, the same for another tenant's VM tool as for a missing one) and its args valid
 * against the tool's JSON Schema (400 with the step and the issues).
 */
export async function checkSteps(
  router: ToolRouter,
  steps: readonly Pick<ToolPlanStep, "tool" | "args">[],
  scope: RouteScope,
): Promise<void> {
  const visible = new Map((await router.tools(scope)).map((tool) => [tool.name, tool]));
  for (const [index, step] of steps.entries()) {
    const tool = visible.get(step.tool);
    if (!tool)
      throw new ServiceError("NOT_FOUND", `Step ${index}: unknown tool ${step.tool}`, { details: { step: index, tool: step.tool } });
    const issues = schemaIssues(tool.inputSchema, step.args);
    if (issues.length) {
      const first = issues[0]!;
      throw new ServiceError(
        "VALIDATION_FAILED",
        `Step ${index}: invalid arguments for ${step.tool}: ${first.path ? `${first.path} ` : ""}${first.message}`,
        {
          details: { step: index, tool: step.tool, issues },
        },
      );
    }
  }
}

/**
 * Runs a stored plan step by step through the catalog, saving the plan after every step so
 * its progress can be read while it runs. Stops at the first step that throws or whose result
 * is an error: the plan ends `failed` with `failedStep`, later steps `skipped`. One execution
 * per plan at a time (409 otherwise), across instances; the claim expires, so a plan left
 * `running` by a crashed process can be executed again. A plan may be executed again after it
 * ended: the step records are reset and overwritten.
 */
export async function executePlan(
  deps: ToolsDeps,
  repo: ToolPlansRepo,
  router: ToolRouter,
  plan: ToolPlan,
  scope: RouteScope,
  signal: AbortSignal,
): Promise<ToolPlan> {
  await checkSteps(router, plan.steps, scope);
  const timeoutMs = deps.config.GATEWAY_TIMEOUT_SECONDS * 1000;
  if (!(await repo.claim(plan.id, plan.steps.length * timeoutMs + 60_000)))
    throw new ServiceError("CONFLICT", `Plan ${plan.id} is already running`);
  try {
    plan.status = "running";
    plan.startedAt = nowIso();
    plan.finishedAt = null;
    plan.failedStep = null;
    plan.error = null;
    for (const step of plan.steps) Object.assign(step, { status: "pending", result: null, error: null, durationMs: null, startedAt: null });
    plan.updatedAt = plan.startedAt;
    await repo.put(plan);
    let failed = false;
    for (const step of plan.steps) {
      if (failed) {
        step.status = "skipped";
        continue;
      }
      step.startedAt = nowIso();
      const started = performance.now();
      try {
        // A plan run by a caller whose allow-lists leave a step's tool out fails there, as for an unknown tool.
        if (!allowedBy(scope.allowed, step.tool)) throw new ServiceError("NOT_FOUND", `Unknown tool: ${step.tool}`);
        const result = await deps.catalog.call(step.tool, step.args, { timeoutMs, signal, tenantId: scope.tenantId });
        step.result = result;
        if (result.isError) step.error = resultText(result) || "The tool reported an error";
      } catch (error) {
        step.error = toServiceError(error).message;
      }
      step.durationMs = Math.round((performance.now() - started) * 100) / 100;
      step.status = step.error ? "failed" : "completed";
      if (step.error) {
        failed = true;
        plan.status = "failed";
        plan.failedStep = step.index;
        plan.error = `Step ${step.index} (${step.tool}) failed: ${step.error}`;
      }
      plan.updatedAt = nowIso();
      await repo.put(plan);
    }
    if (!failed) plan.status = "completed";
    plan.finishedAt = nowIso();
    plan.updatedAt = plan.finishedAt;
    await repo.put(plan);
    return plan;
  } finally {
    await repo.release(plan.id);
  }
}
