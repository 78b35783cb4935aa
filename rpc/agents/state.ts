import { ServiceError } from "../errors.js";
import type { Services } from "../services.js";
import type { AgentRecord } from "../../storage/repos/agents.js";
import type { AgentLifecycle } from "../../storage/repos/agent-state.js";
import { agentTimestamp } from "./time.js";

/**
 * The agent state machine (docs/agents.md "Status"). Stored: the lifecycle state
 * (`idle` → `deployed` ⇄ `paused`) and whether the last invocation ended in error.
 * Derived: `running` while at least one invocation is in flight. Every value lives in
 * storage (storage/repos/agent-state.ts), so transitions are compare-and-set (two concurrent
 * deploys: one 409) and concurrent invocations each add and remove their own count.
 */
export type Lifecycle = AgentLifecycle;
export type AgentStatus = Lifecycle | "running" | "error";

/**
 * Records that the agent's status changed, for its `updatedAt` (spec 2.6). Kept beside the
 * state values rather than in the record, so a status change never rewrites the record a
 * concurrent PUT is writing. Strictly increasing: two changes in one millisecond still differ.
 */
async function statusChanged(services: Services, agentId: string): Promise<void> {
  const current = await services.agentState.changedAt(agentId);
  const after = current ? Date.parse(`${current}Z`) + 1 : 0;
  await services.agentState.setChangedAt(agentId, current, agentTimestamp(new Date(Math.max(Date.now(), after))));
}

/** When the agent's status last changed (null: never since it was created). */
export function statusChangedAt(services: Services, agentId: string): Promise<string | null> {
  return services.agentState.changedAt(agentId);
}

export async function lifecycleOf(services: Services, agentId: string): Promise<Lifecycle> {
  return services.agentState.lifecycle(agentId);
}

export async function runningCount(services: Services, agentId: string): Promise<number> {
  return services.agentState.running(agentId);
}

/** `running` > `paused` > `error` > `deployed` / `idle`. */
export async function statusOf(services: Services, agentId: string): Promise<AgentStatus> {
  const [lifecycle, running, failed] = await Promise.all([
    lifecycleOf(services, agentId),
    runningCount(services, agentId),
    services.agentState.failed(agentId),
  ]);
  if (running > 0) return "running";
  if (lifecycle === "paused") return "paused";
  if (failed) return "error";
  return lifecycle;
}

export async function runStarted(services: Services, agentId: string): Promise<number> {
  const running = await services.agentState.addRunning(agentId, 1);
  await statusChanged(services, agentId);
  return running;
}

/** Ends one invocation: the count goes down; the error mark follows the outcome. */
export async function runFinished(services: Services, agentId: string, failed: boolean): Promise<void> {
  const state = services.agentState;
  await state.markFailed(agentId, failed);
  if ((await state.addRunning(agentId, -1)) <= 0) await state.dropRunningIfZero(agentId);
  await statusChanged(services, agentId);
}

export type Transition = "deploy" | "pause" | "resume";

const TRANSITIONS: Record<Transition, { from: Lifecycle; to: Lifecycle; refuse: Partial<Record<Lifecycle, string>> }> = {
  deploy: { from: "idle", to: "deployed", refuse: { deployed: "The agent is already deployed", paused: "The agent is paused; resume it instead" } },
  pause: { from: "deployed", to: "paused", refuse: { idle: "Only a deployed agent can be paused", paused: "The agent is already paused" } },
  resume: { from: "paused", to: "deployed", refuse: { idle: "Only a paused agent can be resumed", deployed: "The agent is not paused" } },
};

/** Applies a transition or throws 409 naming the current status. */
export async function transition(services: Services, agent: AgentRecord, name: Transition): Promise<AgentStatus> {
  const rule = TRANSITIONS[name];
  const current = await lifecycleOf(services, agent.id);
  const conflict = (message: string, status: AgentStatus) =>
    new ServiceError("CONFLICT", message, { details: { status, transition: name, allowedFrom: rule.from } });
  if (current !== rule.from) throw conflict(rule.refuse[current] ?? `Cannot ${name} from ${current}`, await statusOf(services, agent.id));
  // Deploying swaps what serves invocations: not while any is in flight.
  if (name === "deploy" && (await runningCount(services, agent.id)) > 0) throw conflict("The agent is running; deploy once its invocations finish", "running");
  if (!(await services.agentState.setLifecycle(agent.id, current, rule.to))) {
    throw conflict("The agent changed state concurrently; try again", await statusOf(services, agent.id));
  }
  if (name === "deploy") await services.agentState.markFailed(agent.id, false);
  await statusChanged(services, agent.id);
  return statusOf(services, agent.id);
}

/** Removes every state value of a deleted agent. */
export function clearState(services: Services, agentId: string): Promise<void> {
  return services.agentState.clear(agentId);
}
