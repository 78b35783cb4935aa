import { randomBytes } from "node:crypto";
import { ServiceError } from "../errors.js";
import type { Services } from "../services.js";
import type { AgentRecord } from "../../storage/repos/agents.js";
import { agentTimestamp } from "./time.js";

/**
 * The agent state machine (docs/agents.md "Status"). Stored: the lifecycle state
 * (`idle` → `deployed` ⇄ `paused`) and whether the last invocation ended in error.
 * Derived: `running` while at least one invocation is in flight. Every value lives in
 * `store.atomic`, so transitions are compare-and-set (two concurrent deploys: one 409) and
 * concurrent invocations each add and remove their own count.
 */
export type Lifecycle = "idle" | "deployed" | "paused";
export type AgentStatus = Lifecycle | "running" | "error";

const lifecycleKey = (id: string) => `agent-state:${id}`;
const boots = new WeakMap<object, string>();

/**
 * With Redis the running count is shared by every instance. The memory and fs drivers serve
 * one process, so the count is scoped to this start: a count left behind by a process that
 * stopped mid-run (its runs died with it) is never read again.
 */
function runningKey(services: Services, id: string): string {
  if (services.store.driver === "redis") return `agent-running:${id}`;
  let boot = boots.get(services.store);
  if (!boot) boots.set(services.store, (boot = randomBytes(6).toString("hex")));
  return `agent-running:${boot}:${id}`;
}
const errorKey = (id: string) => `agent-error:${id}`;
const changedKey = (id: string) => `agent-status-at:${id}`;

/**
 * Records that the agent's status changed, for its `updatedAt` (spec 2.6). Kept beside the
 * state values rather than in the record, so a status change never rewrites the record a
 * concurrent PUT is writing. Strictly increasing: two changes in one millisecond still differ.
 */
async function statusChanged(services: Services, agentId: string): Promise<void> {
  const { atomic } = services.store;
  const current = await atomic.get(changedKey(agentId));
  const after = current ? Date.parse(`${current}Z`) + 1 : 0;
  await atomic.compareAndSet(changedKey(agentId), current, agentTimestamp(new Date(Math.max(Date.now(), after))));
}

/** When the agent's status last changed (null: never since it was created). */
export function statusChangedAt(services: Services, agentId: string): Promise<string | null> {
  return services.store.atomic.get(changedKey(agentId));
}

export async function lifecycleOf(services: Services, agentId: string): Promise<Lifecycle> {
  return ((await services.store.atomic.get(lifecycleKey(agentId))) as Lifecycle | null) ?? "idle";
}

export async function runningCount(services: Services, agentId: string): Promise<number> {
  return Math.max(0, await services.store.atomic.balance(runningKey(services, agentId)));
}

/** `running` > `paused` > `error` > `deployed` / `idle`. */
export async function statusOf(services: Services, agentId: string): Promise<AgentStatus> {
  const [lifecycle, running, failed] = await Promise.all([
    lifecycleOf(services, agentId),
    runningCount(services, agentId),
    services.store.atomic.get(errorKey(agentId)),
  ]);
  if (running > 0) return "running";
  if (lifecycle === "paused") return "paused";
  if (failed) return "error";
  return lifecycle;
}

export async function runStarted(services: Services, agentId: string): Promise<number> {
  const running = await services.store.atomic.adjust(runningKey(services, agentId), 1);
  await statusChanged(services, agentId);
  return running;
}

/** Ends one invocation: the count goes down; the error mark follows the outcome. */
export async function runFinished(services: Services, agentId: string, failed: boolean): Promise<void> {
  const { atomic } = services.store;
  if (failed) await atomic.compareAndSet(errorKey(agentId), null, "1");
  else await atomic.delete(errorKey(agentId));
  const key = runningKey(services, agentId);
  // Back to zero: the key goes, so finished agents leave nothing behind.
  if ((await atomic.adjust(key, -1)) <= 0) await atomic.compareAndSet(key, "0", null);
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
  const expected = current === "idle" ? null : current;
  const next = rule.to === "idle" ? null : rule.to;
  if (!(await services.store.atomic.compareAndSet(lifecycleKey(agent.id), expected, next))) {
    throw conflict("The agent changed state concurrently; try again", await statusOf(services, agent.id));
  }
  if (name === "deploy") await services.store.atomic.delete(errorKey(agent.id));
  await statusChanged(services, agent.id);
  return statusOf(services, agent.id);
}

/** Removes every state value of a deleted agent. */
export async function clearState(services: Services, agentId: string): Promise<void> {
  const { atomic } = services.store;
  await Promise.all([
    atomic.delete(lifecycleKey(agentId)),
    atomic.delete(errorKey(agentId)),
    atomic.delete(runningKey(services, agentId)),
    atomic.delete(changedKey(agentId)),
  ]);
}
