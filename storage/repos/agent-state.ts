import { randomBytes } from "node:crypto";
import type { Store } from "../store.js";

export type AgentLifecycle = "idle" | "deployed" | "paused";

/**
 * The key schemes of an agent's live state (docs/agents.md "Status"), all in `store.atomic`
 * so transitions are compare-and-set and counts are atomic across instances: the lifecycle,
 * the running count, the last-run-failed mark, when the status last changed, the log
 * sequence and the delete claim. The rules that use them live in rpc/agents/state.ts.
 */
export class AgentStateRepo {
  readonly #atomic: Store["atomic"];
  readonly #runningPrefix: string;

  constructor(store: Store) {
    this.#atomic = store.atomic;
    // With Redis the running count is shared by every instance. The memory and fs drivers
    // serve one process, so the count is scoped to this start: a count left behind by a
    // process that stopped mid-run (its runs died with it) is never read again.
    this.#runningPrefix = store.driver === "redis" ? "agent-running" : `agent-running:${randomBytes(6).toString("hex")}`;
  }

  async lifecycle(agentId: string): Promise<AgentLifecycle> {
    return ((await this.#atomic.get(`agent-state:${agentId}`)) as AgentLifecycle | null) ?? "idle";
  }

  /** Moves the lifecycle from `from` to `to` only if it still is `from` (idle is stored as nothing). */
  setLifecycle(agentId: string, from: AgentLifecycle, to: AgentLifecycle): Promise<boolean> {
    return this.#atomic.compareAndSet(`agent-state:${agentId}`, from === "idle" ? null : from, to === "idle" ? null : to);
  }

  async running(agentId: string): Promise<number> {
    return Math.max(0, await this.#atomic.balance(`${this.#runningPrefix}:${agentId}`));
  }

  addRunning(agentId: string, delta: 1 | -1): Promise<number> {
    return this.#atomic.adjust(`${this.#runningPrefix}:${agentId}`, delta);
  }

  /** Back to zero: the key goes, so finished agents leave nothing behind. */
  async dropRunningIfZero(agentId: string): Promise<void> {
    await this.#atomic.compareAndSet(`${this.#runningPrefix}:${agentId}`, "0", null);
  }

  async failed(agentId: string): Promise<boolean> {
    return Boolean(await this.#atomic.get(`agent-error:${agentId}`));
  }

  async markFailed(agentId: string, failed: boolean): Promise<void> {
    if (failed) await this.#atomic.compareAndSet(`agent-error:${agentId}`, null, "1");
    else await this.#atomic.delete(`agent-error:${agentId}`);
  }

  changedAt(agentId: string): Promise<string | null> {
    return this.#atomic.get(`agent-status-at:${agentId}`);
  }

  setChangedAt(agentId: string, current: string | null, next: string): Promise<boolean> {
    return this.#atomic.compareAndSet(`agent-status-at:${agentId}`, current, next);
  }

  /** The next log line's sequence number (never shared by two writers). */
  nextLogSeq(agentId: string): Promise<number> {
    return this.#atomic.adjust(`agent-log-seq:${agentId}`, 1);
  }

  async dropLogSeq(agentId: string): Promise<void> {
    await this.#atomic.delete(`agent-log-seq:${agentId}`);
  }

  /** Claims the agent's deletion for `ttlMs`; false when another delete holds it. */
  claimDelete(agentId: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.setIfAbsent(`agent-deleting:${agentId}`, "1", ttlMs);
  }

  /** Removes every state value of a deleted agent. */
  async clear(agentId: string): Promise<void> {
    await Promise.all([
      this.#atomic.delete(`agent-state:${agentId}`),
      this.#atomic.delete(`agent-error:${agentId}`),
      this.#atomic.delete(`${this.#runningPrefix}:${agentId}`),
      this.#atomic.delete(`agent-status-at:${agentId}`),
    ]);
  }
}
