import { Collection } from "../collection.js";
import type { Store } from "../store.js";

/** A step's stored outcome: an MCP CallToolResult, as the tool returned it. */
export interface StoredToolResult {
  content: { type: string; text?: string; [key: string]: unknown }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

export type ToolPlanStatus = "planned" | "running" | "completed" | "failed";
export type ToolStepStatus = "pending" | "completed" | "failed" | "skipped";

/** One step of a tool plan and, once executed, what it did. */
export interface ToolPlanStep {
  index: number;
  /** `builtin`, an upstream MCP server's name, or `vm:<vmId>`. */
  server: string;
  /** The catalog name of the tool. */
  tool: string;
  args: Record<string, unknown>;
  reason: string;
  /** The ranker's score for ranking plans. */
  score?: number;
  /** The clause of the request this step comes from (ranking plans). */
  clause?: string;
  /** Required arguments the ranking planner could not read from the clause. */
  missing?: string[];
  status: ToolStepStatus;
  result: StoredToolResult | null;
  error: string | null;
  durationMs: number | null;
  startedAt: string | null;
}

/** A stored plan of tool calls (POST /mcp/plan, /mcp/execute). */
export interface ToolPlan {
  id: string;
  input: string;
  steps: ToolPlanStep[];
  /** The user who made it; only they can read or execute it. */
  createdBy: string;
  createdAt: string;
  updatedAt: string;
  status: ToolPlanStatus;
  /** How the steps were chosen: by a model, or by the ranking (with why the model was not used). */
  planner: { kind: "model" | "ranking" | "caller"; model?: string; fallback?: string };
  tenantId?: string;
  preferredMcp?: string;
  /** Clauses of the request no tool matched (ranking plans). */
  unmatched: string[];
  /** Index of the step that failed, when status is `failed`. */
  failedStep: number | null;
  error: string | null;
  startedAt: string | null;
  finishedAt: string | null;
}

/** Tool plans per user at `tool-plans:<userId>:<planId>`: a plan is only ever found through its owner. */
export class ToolPlansRepo {
  readonly #plans: Collection<ToolPlan>;
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
    this.#plans = new Collection<ToolPlan>(store.kv, "tool-plans");
  }

  /** The plan, or null when it is missing or another user's (the same answer). */
  get(userId: string, id: string): Promise<ToolPlan | null> {
    return Collection.validId(userId) && Collection.validId(id) ? this.#plans.get(userId, id) : Promise.resolve(null);
  }

  put(plan: ToolPlan): Promise<ToolPlan> {
    return this.#plans.put([plan.createdBy, plan.id], plan);
  }

  /** The user's plans, newest first. */
  async list(userId: string): Promise<ToolPlan[]> {
    if (!Collection.validId(userId)) return [];
    const plans = await this.#plans.list(userId);
    return plans.sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id));
  }

  /**
   * Marks a plan as being executed; false when an execution already holds it (on any
   * instance). The claim expires after `ttlMs` so a crashed run does not lock it forever.
   */
  claim(id: string, ttlMs: number): Promise<boolean> {
    return this.#store.atomic.setIfAbsent(`tool-plan-run:${id}`, "1", ttlMs);
  }

  release(id: string): Promise<void> {
    return this.#store.atomic.delete(`tool-plan-run:${id}`);
  }
}
