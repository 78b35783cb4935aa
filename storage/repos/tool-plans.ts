import { Collection } from "../collection.js";
import type { Store } from "../store.js";
import { SecretBox } from "../secret-box.js";

/** What every read of a plan shows in place of a credential-like value. */
export const REDACTED = "[redacted]";

/**
 * Argument names whose values are credentials (header names as tools take them, e.g.
 * `http_fetch`'s `headers`): `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`,
 * and anything ending in `-token` or `-key` (`X-API-Key`, `X-Auth-Token`), case-insensitive.
 */
export function isCredentialName(name: string): boolean {
  return /^(authorization|proxy-authorization|cookie|set-cookie)$/i.test(name) || /-(token|key)$/i.test(name);
}

/** A copy of `value` with every credential-named entry (at any depth) replaced by `map(entry)`. */
function mapCredentials(value: unknown, map: (entry: unknown) => unknown): unknown {
  if (Array.isArray(value)) return value.map((item) => mapCredentials(item, map));
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [name, entry] of Object.entries(value)) out[name] = isCredentialName(name) ? map(entry) : mapCredentials(entry, map);
  return out;
}

/** True when some credential-named entry is still stored in plaintext (written before encryption). */
function hasPlaintextCredential(value: unknown): boolean {
  let found = false;
  mapCredentials(value, (entry) => {
    if (!SecretBox.isSealed(entry)) found = true;
    return entry;
  });
  return found;
}

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

/**
 * Tool plans per user at `tool-plans:<userId>:<planId>`: a plan is only ever found through its
 * owner. Credential-like argument values (isCredentialName) are sealed with AES-256-GCM
 * before a plan is written; every read shows them as `[redacted]`, and only `forRun` opens
 * them, for the execution that needs them.
 */
export class ToolPlansRepo {
  readonly #plans: Collection<ToolPlan>;
  readonly #store: Store;
  readonly #box: SecretBox;

  constructor(store: Store, box: SecretBox) {
    this.#store = store;
    this.#box = box;
    this.#plans = new Collection<ToolPlan>(store, "tool-plans");
  }

  /** The plan as every endpoint shows it (credentials redacted), or null when it is missing or another user's (the same answer). */
  async get(userId: string, id: string): Promise<ToolPlan | null> {
    const stored = await this.#read(userId, id);
    return stored ? this.redacted(stored) : null;
  }

  /** The plan with its credentials opened, for executing it; never return it to a caller. */
  async forRun(userId: string, id: string): Promise<ToolPlan | null> {
    const stored = await this.#read(userId, id);
    if (!stored) return null;
    return {
      ...stored,
      steps: stored.steps.map((step) => ({
        ...step,
        args: mapCredentials(step.args, (entry) => this.#open(entry)) as Record<string, unknown>,
      })),
    };
  }

  /** Stores a plan (credentials sealed); answers it redacted. */
  async put(plan: ToolPlan): Promise<ToolPlan> {
    const sealed = {
      ...plan,
      steps: plan.steps.map((step) => ({
        ...step,
        args: mapCredentials(step.args, (entry) => (SecretBox.isSealed(entry) ? entry : this.#box.sealJson(entry))) as Record<
          string,
          unknown
        >,
      })),
    };
    await this.#plans.put([plan.createdBy, plan.id], sealed);
    return this.redacted(sealed);
  }

  /** A copy of a plan with every credential-like value replaced by `[redacted]`. */
  redacted(plan: ToolPlan): ToolPlan {
    return {
      ...plan,
      steps: plan.steps.map((step) => ({ ...step, args: mapCredentials(step.args, () => REDACTED) as Record<string, unknown> })),
    };
  }

  /** The user's plans, newest first, redacted. */
  async list(userId: string): Promise<ToolPlan[]> {
    if (!Collection.validId(userId)) return [];
    const plans = await this.#plans.list(userId);
    for (const plan of plans) this.#migrate(plan);
    return plans.sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id)).map((plan) => this.redacted(plan));
  }

  async #read(userId: string, id: string): Promise<ToolPlan | null> {
    if (!Collection.validId(userId) || !Collection.validId(id)) return null;
    const plan = await this.#plans.get(userId, id);
    if (plan) this.#migrate(plan);
    return plan;
  }

  /** Seals a plan stored before encryption existed; a running plan is left to its run, whose next write seals it. */
  #migrate(plan: ToolPlan): void {
    if (plan.status === "running" || !plan.steps.some((step) => hasPlaintextCredential(step.args))) return;
    void this.put(plan).catch(() => undefined);
  }

  #open(entry: unknown): unknown {
    if (!SecretBox.isSealed(entry)) return entry;
    try {
      return this.#box.openJson(entry);
    } catch {
      // A caller's own value that merely looks sealed: it was stored as given.
      return entry;
    }
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
