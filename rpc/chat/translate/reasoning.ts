import type { ReasoningEffort } from "../types.js";

/**
 * Reasoning effort ↔ thinking budgets (docs/dialects.md "Reasoning"). The chat format and the
 * Responses API name an effort; the Messages API and Gemini take a budget of tokens. The same
 * table is read both ways, so a budget read from a Messages request becomes the nearest effort.
 */
const BUDGETS: readonly [ReasoningEffort, number][] = [
  ["minimal", 1024],
  ["low", 2048],
  ["medium", 8192],
  ["high", 16384],
  ["xhigh", 32000],
  ["max", 64000],
];

/** The thinking budget of an effort (0 for `none`). */
export function budgetOf(effort: ReasoningEffort): number {
  if (effort === "none") return 0;
  return BUDGETS.find(([name]) => name === effort)?.[1] ?? 8192;
}

/** The effort nearest a budget: the smallest whose budget is at least it. */
export function effortOf(budget: number): ReasoningEffort {
  if (budget <= 0) return "none";
  return BUDGETS.find(([, tokens]) => budget <= tokens)?.[0] ?? "max";
}

/**
 * Anthropic's `thinking` for a request: the given budget (or the effort's), at least 1024 and
 * below `max_tokens` as the Messages API requires; undefined when `max_tokens` leaves no room
 * for that (the caller warns).
 */
export function anthropicThinking(
  effort: ReasoningEffort,
  budget: number | undefined,
  maxTokens: number,
): { type: "enabled"; budget_tokens: number } | { type: "disabled" } | undefined {
  if (effort === "none") return { type: "disabled" };
  const wanted = Math.max(1024, budget ?? budgetOf(effort));
  const tokens = Math.min(wanted, maxTokens - 1);
  return tokens >= 1024 ? { type: "enabled", budget_tokens: tokens } : undefined;
}
