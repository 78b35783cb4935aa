import type { Store } from "../store.js";

export type AgentLifecycle = "idle" | "deployed" | "paused";

/** A run's place has no limit: the places only count the runs in flight. */
const UNLIMITED = Number.MAX_SAFE_INTEGER;

/**
 * The key schemes of an agent's live state (docs/agents.md "Status"), all in `store.atomic`
 * so transitions are compare-and-set and counts are atomic across instances: the lifecycle,
 * the runs in flight, the last-run-failed mark, when the status last changed, the log
 * sequence and the delete claim. The rules that use them live in rpc/agents/state.ts.
 *
 * The runs in flight are places with leases (`agent-runs:<agentId>`, storage/atomic.ts
 * claimPlace), one per run, renewed by the process running it: a run on an instance that dies
 * ends with its lease (AGENT_RUN_LEASE_SECONDS), so its agent is not left `running`. On memory
 * and fs the places live in the one process, and end with it.
 */
export class AgentStateRepo {
  readonly #atomic: Store["atomic"];

  constructor(store: Store) {
    this.#atomic = store.atomic;
  }

  #runs(agentId: string): string {
    return `agent-runs:${agentId}`;
  }

  async lifecycle(agentId: string): Promise<AgentLifecycle> {
    return ((await this.#atomic.get(`agent-state:${agentId}`)) as AgentLifecycle | null) ?? "idle";
  }

  /** Moves the lifecycle from `from` to `to` only if it still is `from` (idle is stored as nothing). */
  setLifecycle(agentId: string, from: AgentLifecycle, to: AgentLifecycle): Promise<boolean> {
    return this.#atomic.compareAndSet(`agent-state:${agentId}`, from === "idle" ? null : from, to === "idle" ? null : to);
  }

  /** How many runs of the agent are in flight (their leases live). */
  async running(agentId: string): Promise<number> {
    return (await this.#atomic.places(this.#runs(agentId))).holders;
  }

  /** A run starts: its place, leased for `leaseMs`. */
  async runStarted(agentId: string, runId: string, leaseMs: number): Promise<void> {
    await this.#atomic.claimPlace(this.#runs(agentId), runId, runId, 1, UNLIMITED, leaseMs);
  }

  /** A run goes on: its lease pushed to `leaseMs` from now. */
  renewRun(agentId: string, runId: string, leaseMs: number): Promise<void> {
    return this.#atomic.renewPlaces(this.#runs(agentId), [{ holder: runId, token: runId, weight: 1 }], leaseMs);
  }

  runEnded(agentId: string, runId: string): Promise<void> {
    return this.#atomic.releasePlace(this.#runs(agentId), runId, runId);
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

  /** Removes every state value of a deleted agent (it has no run in flight: their places end with them). */
  async clear(agentId: string): Promise<void> {
    await Promise.all([
      this.#atomic.delete(`agent-state:${agentId}`),
      this.#atomic.delete(`agent-error:${agentId}`),
      // The running count of earlier versions, which had no lease.
      this.#atomic.delete(`agent-running:${agentId}`),
      this.#atomic.delete(`agent-status-at:${agentId}`),
    ]);
  }
}
