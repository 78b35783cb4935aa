import { ServiceError } from "../errors.js";
import { EventQueue } from "./queue.js";
import type { AgentEvent } from "./run.js";
import type { AgentsDeps } from "./deps.js";

/** Bus channel of one agent's run events, so a client on any instance can watch. */
export const agentRunsChannel = (agentId: string) => `agent-runs:${agentId}`;

export interface AgentRunMessage {
  runId: string;
  event: AgentEvent;
}

/** Bus channel on which a cancel reaches the instance running the run (docs/architecture.md "More than one instance"). */
const CANCEL_CHANNEL = "agent-run-cancels";

interface CancelMessage {
  runId: string;
}

interface LocalRuns {
  controllers: Map<string, AbortController>;
  listening: Promise<unknown>;
}

// The runs of each running service set (tests start several servers in one process).
const registries = new WeakMap<AgentsDeps, LocalRuns>();

function localRuns(deps: AgentsDeps): LocalRuns {
  let runs = registries.get(deps);
  if (!runs) {
    const controllers = new Map<string, AbortController>();
    const listening = deps.store.bus
      .subscribe(CANCEL_CHANNEL, (raw) => {
        const runId = (raw as Partial<CancelMessage> | null)?.runId;
        if (typeof runId === "string") controllers.get(runId)?.abort(cancelledByClient());
      })
      .then((unsubscribe) => deps.onClose(unsubscribe));
    runs = { controllers, listening };
    registries.set(deps, runs);
  }
  return runs;
}

function cancelledByClient(): ServiceError {
  return new ServiceError("UNAVAILABLE", "Cancelled by the client");
}

/**
 * Makes a run cancellable from anywhere: a record in storage says whose it is, and this
 * instance listens for cancels on the bus. Returns the run's signal (aborted by the caller's
 * `signal` or by a cancel) and the function that forgets the run when it ends.
 */
export async function trackRun(
  deps: AgentsDeps,
  run: { runId: string; agentId: string; userId: string; startedAt: string },
  signal: AbortSignal,
): Promise<{ signal: AbortSignal; untrack: () => Promise<void> }> {
  const runs = localRuns(deps);
  await runs.listening;
  const controller = new AbortController();
  const follow = () => controller.abort(signal.reason);
  if (signal.aborted) follow();
  else signal.addEventListener("abort", follow, { once: true });
  runs.controllers.set(run.runId, controller);
  await deps.agents.saveRun(run);
  return {
    signal: controller.signal,
    async untrack() {
      signal.removeEventListener("abort", follow);
      runs.controllers.delete(run.runId);
      await deps.agents.removeRun(run.runId).catch(() => undefined);
    },
  };
}

/**
 * Cancels a run of the caller's, on this instance or another. A run that ended, never
 * existed or is another user's is the same 404.
 */
export async function cancelRun(
  deps: AgentsDeps,
  userId: string,
  runId: string,
  mayCancel?: (agentId: string) => Promise<boolean>,
): Promise<{ runId: string; agentId: string }> {
  const record = await deps.agents.getRun(runId);
  if (!record || (record.userId !== userId && !(await mayCancel?.(record.agentId))))
    throw new ServiceError("NOT_FOUND", `No running run ${runId}`);
  const local = localRuns(deps).controllers.get(runId);
  if (local) local.abort(cancelledByClient());
  else await deps.store.bus.publish(CANCEL_CHANNEL, { runId } satisfies CancelMessage);
  return { runId, agentId: record.agentId };
}

/** One event of a watched run, as `agents.subscribe` yields it. */
export type WatchedEvent = { type: "subscribed"; agentId: string } | (AgentEvent & { runId: string });

/**
 * The runs of one agent, started on any instance, from the bus: first `subscribed` once the
 * subscription is live, then every run's events with their runId, until `signal` aborts
 * (or the reader stops).
 */
export async function watchRuns(deps: AgentsDeps, agentId: string, signal: AbortSignal): Promise<AsyncIterable<WatchedEvent>> {
  const queue = new EventQueue<WatchedEvent>();
  const unsubscribe = await deps.store.bus.subscribe(agentRunsChannel(agentId), (raw) => {
    const message = raw as Partial<AgentRunMessage> | null;
    if (!message || typeof message.runId !== "string" || typeof message.event !== "object" || message.event === null) return;
    queue.push({ ...(message.event as AgentEvent), runId: message.runId });
  });
  const stop = () => queue.close();
  if (signal.aborted) stop();
  else signal.addEventListener("abort", stop, { once: true });
  queue.push({ type: "subscribed", agentId });
  async function* events(): AsyncGenerator<WatchedEvent> {
    try {
      yield* queue;
    } finally {
      signal.removeEventListener("abort", stop);
      await unsubscribe().catch(() => undefined);
    }
  }
  return events();
}
