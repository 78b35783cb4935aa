import { ServiceError } from "../errors.js";
import type { AgentRecord } from "../../storage/repos/agents.js";
import type { AgentLifecycle } from "../../storage/repos/agent-state.js";
import { agentTimestamp } from "../time.js";
import type { Repos } from "../repos.js";

/**
 * The agent state machine (docs/agents.md "Status"). Stored: the lifecycle state
 * (`idle` → `deployed` ⇄ `paused`) and whether the last invocation ended in error.
 * Derived: `running` while at least one invocation is in flight. Every value lives in
 * storage (storage/repos/agent-state.ts), so transitions are compare-and-set (two concurrent
 * deploys: one 409) and concurrent invocations each take and give back their own place, a
 * lease the running process renews.
 */
export type Lifecycle = AgentLifecycle;
export type AgentStatus = Lifecycle | "running" | "error";

/**
 * Records that the agent's status changed, for its `updatedAt` (docs/interface.md 2.6). Kept beside the
 * state values rather than in the record, so a status change never rewrites the record a
 * concurrent PUT is writing. Strictly increasing: two changes in one millisecond still differ.
 */
async function statusChanged(deps: Pick<Repos, "agentState">, agentId: string): Promise<void> {
  const current = await deps.agentState.changedAt(agentId);
  const after = current ? Date.parse(`${current}Z`) + 1 : 0;
  await deps.agentState.setChangedAt(agentId, current, agentTimestamp(new Date(Math.max(Date.now(), after))));
}

/** When the agent's status last changed (null: never since it was created). */
export function statusChangedAt(deps: Pick<Repos, "agentState">, agentId: string): Promise<string | null> {
  return deps.agentState.changedAt(agentId);
}

export async function lifecycleOf(deps: Pick<Repos, "agentState">, agentId: string): Promise<Lifecycle> {
  return deps.agentState.lifecycle(agentId);
}

export async function runningCount(deps: Pick<Repos, "agentState">, agentId: string): Promise<number> {
  return deps.agentState.running(agentId);
}

/** `running` > `paused` > `error` > `deployed` / `idle`. */
export async function statusOf(deps: Pick<Repos, "agentState">, agentId: string): Promise<AgentStatus> {
  const [lifecycle, running, failed] = await Promise.all([
    lifecycleOf(deps, agentId),
    runningCount(deps, agentId),
    deps.agentState.failed(agentId),
  ]);
  if (running > 0) return "running";
  if (lifecycle === "paused") return "paused";
  if (failed) return "error";
  return lifecycle;
}

/** The renewals of the runs this process has in flight, by run id. */
const renewals = new Map<string, NodeJS.Timeout>();

/**
 * Starts one invocation: its place among the agent's runs in flight, leased for `leaseMs` and
 * renewed every third of it while the run goes on (storage/repos/agent-state.ts), so a run
 * whose instance died stops counting within the lease.
 */
export async function runStarted(deps: Pick<Repos, "agentState">, agentId: string, runId: string, leaseMs: number): Promise<void> {
  await deps.agentState.runStarted(agentId, runId, leaseMs);
  const timer = setInterval(() => void deps.agentState.renewRun(agentId, runId, leaseMs).catch(() => undefined), leaseMs / 3);
  timer.unref();
  renewals.set(runId, timer);
  await statusChanged(deps, agentId);
}

/** Ends one invocation: its place goes; the error mark follows the outcome. */
export async function runFinished(deps: Pick<Repos, "agentState">, agentId: string, runId: string, failed: boolean): Promise<void> {
  clearInterval(renewals.get(runId));
  renewals.delete(runId);
  const state = deps.agentState;
  await state.markFailed(agentId, failed);
  await state.runEnded(agentId, runId);
  await statusChanged(deps, agentId);
}

export type Transition = "deploy" | "pause" | "resume";

const TRANSITIONS: Record<Transition, { from: Lifecycle; to: Lifecycle; refuse: Partial<Record<Lifecycle, string>> }> = {
  deploy: {
    from: "idle",
    to: "deployed",
    refuse: { deployed: "The agent is already deployed", paused: "The agent is paused; resume it instead" },
  },
  pause: { from: "deployed", to: "paused", refuse: { idle: "Only a deployed agent can be paused", paused: "The agent is already paused" } },
  resume: { from: "paused", to: "deployed", refuse: { idle: "Only a paused agent can be resumed", deployed: "The agent is not paused" } },
};

/** Applies a transition or throws 409 naming the current status. */
export async function transition(deps: Pick<Repos, "agentState">, agent: AgentRecord, name: Transition): Promise<AgentStatus> {
  const rule = TRANSITIONS[name];
  const current = await lifecycleOf(deps, agent.id);
  const conflict = (message: string, status: AgentStatus) =>
    new ServiceError("CONFLICT", message, { details: { status, transition: name, allowedFrom: rule.from } });
  if (current !== rule.from) throw conflict(rule.refuse[current] ?? `Cannot ${name} from ${current}`, await statusOf(deps, agent.id));
  // Deploying swaps what serves invocations: not while any is in flight.
  if (name === "deploy" && (await runningCount(deps, agent.id)) > 0)
    throw conflict("The agent is running; deploy once its invocations finish", "running");
  if (!(await deps.agentState.setLifecycle(agent.id, current, rule.to))) {
    throw conflict("The agent changed state concurrently; try again", await statusOf(deps, agent.id));
  }
  if (name === "deploy") await deps.agentState.markFailed(agent.id, false);
  await statusChanged(deps, agent.id);
  return statusOf(deps, agent.id);
}

/** Removes every state value of a deleted agent. */
export function clearState(deps: Pick<Repos, "agentState">, agentId: string): Promise<void> {
  return deps.agentState.clear(agentId);
}
