import * as v from "valibot";
import type { Principal } from "../../rpc/auth.js";
import { ServiceError, toServiceError } from "../../rpc/errors.js";
import type { Services } from "../../rpc/services.js";
import { agentRunsChannel, invokeAgent, type AgentRunMessage } from "../../rpc/agents/invoke.js";
import { requireAgent } from "../../rpc/agents/records.js";
import type { AgentEvent } from "../../rpc/agents/run.js";

/** Runs one socket may have going at once; past it, `RATE_LIMITED` error frames. */
export const MAX_RUNS_PER_SOCKET = 16;
/** Agents one socket may watch at once. */
export const MAX_SUBSCRIPTIONS_PER_SOCKET = 32;

const AgentId = v.pipe(v.string("agentId must be a string"), v.minLength(1, "agentId is required"), v.maxLength(128, "agentId: at most 128 characters"));
/** A client-chosen tag echoed on every frame of what the message started (optional). */
const ClientTag = v.optional(v.pipe(v.string("id must be a string"), v.maxLength(128, "id: at most 128 characters")));

const InvokeMessage = v.object({
  type: v.optional(v.literal("invoke")),
  id: ClientTag,
  agentId: AgentId,
  input: v.pipe(v.string("input must be a string"), v.minLength(1, "input is required"), v.maxLength(100_000, "input: at most 100000 characters")),
});
const SubscribeMessage = v.object({ type: v.picklist(["subscribe", "unsubscribe"]), id: ClientTag, agentId: AgentId });
const CancelMessage = v.object({ type: v.literal("cancel"), id: ClientTag, runId: v.pipe(v.string("runId must be a string"), v.minLength(1, "runId is required")) });

export type Frame = Record<string, unknown> & { type: string };

export interface SessionOptions {
  services: Services;
  principal: Principal;
  /** The upgrade's request id, in every log line of the socket. */
  requestId: string;
  send(frame: Frame): void;
  /** Orchestrator-proxy mode: agents run elsewhere, every message gets the same error frame. */
  orchestratorMode: boolean;
}

interface LocalRun {
  agentId: string;
  controller: AbortController;
}

/**
 * One agent-stream socket (docs/agents-stream.md): invocations started from it, each framed
 * with its `runId` so many share the socket; subscriptions to runs started anywhere, fed
 * by the bus; errors as `error` frames, never a dropped socket. Closing cancels its runs.
 */
export class AgentStreamSession {
  readonly #options: SessionOptions;
  readonly #runs = new Map<string, LocalRun>();
  /** Runs started here: their events reach the socket directly, not again through a subscription. */
  readonly #ownRuns = new Set<string>();
  readonly #subscriptions = new Map<string, Promise<() => Promise<void>>>();
  #starting = 0;
  #closed = false;

  constructor(options: SessionOptions) {
    this.#options = options;
  }

  /** Handles one text message; never throws (every failure becomes an error frame). */
  async receive(text: string): Promise<void> {
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      return this.#error(new ServiceError("BAD_REQUEST", "Message is not valid JSON"), {});
    }
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      return this.#error(new ServiceError("BAD_REQUEST", "Message must be a JSON object: {agentId, input} or {type: \"subscribe\", agentId}"), {});
    }
    const record = message as Record<string, unknown>;
    const tag = typeof record.id === "string" ? { id: record.id } : {};
    if (this.#options.orchestratorMode) {
      return this.#error(
        new ServiceError("UNAVAILABLE", "Agents run in the orchestrator in this deployment; stream one with GET /gateway/v1/agents/{name}/stream"),
        tag,
      );
    }
    try {
      switch (record.type) {
        case undefined:
        case "invoke":
          return await this.#invoke(parse(InvokeMessage, record));
        case "subscribe":
        case "unsubscribe": {
          const parsed = parse(SubscribeMessage, record);
          return await (parsed.type === "subscribe" ? this.#subscribe(parsed) : this.#unsubscribe(parsed));
        }
        case "cancel":
          return this.#cancel(parse(CancelMessage, record));
        default:
          throw new ServiceError("BAD_REQUEST", `Unknown message type: ${JSON.stringify(record.type)}; use invoke (default), subscribe, unsubscribe or cancel`);
      }
    } catch (error) {
      this.#error(error, { ...tag, ...(typeof record.agentId === "string" ? { agentId: record.agentId } : {}) });
    }
  }

  /** The socket went away: cancel every run it started (their AbortSignal) and stop watching. */
  async close(code?: number): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const [runId, run] of this.#runs) {
      run.controller.abort(new ServiceError("UNAVAILABLE", "The agent stream client disconnected"));
      this.#options.services.log.info({ requestId: this.#options.requestId, event: "agent_stream.run_cancelled", runId, agentId: run.agentId, reason: "client_disconnected", closeCode: code });
    }
    this.#runs.clear();
    const subscriptions = [...this.#subscriptions.values()];
    this.#subscriptions.clear();
    await Promise.all(subscriptions.map(async (pending) => (await pending.catch(() => async () => undefined))().catch(() => undefined)));
  }

  async #invoke(message: v.InferOutput<typeof InvokeMessage>): Promise<void> {
    const tag = message.id === undefined ? {} : { id: message.id };
    if (this.#runs.size + this.#starting >= MAX_RUNS_PER_SOCKET) {
      throw new ServiceError("RATE_LIMITED", `At most ${MAX_RUNS_PER_SOCKET} runs at once on one socket; wait for a done frame or open another socket`);
    }
    const controller = new AbortController();
    this.#starting += 1;
    let handle: Awaited<ReturnType<typeof invokeAgent>>;
    try {
      handle = await invokeAgent(this.#options.services, this.#options.principal, message.agentId, message.input, controller.signal);
    } finally {
      this.#starting -= 1;
    }
    const { runId, events } = handle;
    this.#ownRuns.add(runId);
    const { services, requestId } = this.#options;
    services.log.info({ requestId, event: "agent_stream.run_started", runId, agentId: message.agentId, principal: { userId: this.#options.principal.userId } });
    if (this.#closed) {
      // The socket closed while the run was starting: nobody will read it.
      controller.abort(new ServiceError("UNAVAILABLE", "The agent stream client disconnected"));
      services.log.info({ requestId, event: "agent_stream.run_cancelled", runId, agentId: message.agentId, reason: "client_disconnected" });
    } else {
      this.#runs.set(runId, { agentId: message.agentId, controller });
    }
    try {
      for await (const event of events) this.#send(toFrame(runId, message.agentId, event, tag));
    } catch (error) {
      this.#error(error, { ...tag, runId, agentId: message.agentId });
    } finally {
      this.#runs.delete(runId);
      // Kept a moment longer so a late bus copy of the last event is still recognised.
      setTimeout(() => this.#ownRuns.delete(runId), 5_000).unref();
    }
  }

  async #subscribe(message: v.InferOutput<typeof SubscribeMessage>): Promise<void> {
    const tag = message.id === undefined ? {} : { id: message.id };
    const { services, principal } = this.#options;
    // Only the owner may watch: another user's agent is the same 404 as a missing one.
    const agent = await requireAgent(services, principal.userId, message.agentId);
    if (!this.#subscriptions.has(agent.id)) {
      if (this.#subscriptions.size >= MAX_SUBSCRIPTIONS_PER_SOCKET) {
        throw new ServiceError("RATE_LIMITED", `At most ${MAX_SUBSCRIPTIONS_PER_SOCKET} subscriptions on one socket`);
      }
      const pending = services.store.bus.subscribe(agentRunsChannel(agent.id), (raw) => this.#fromBus(agent.id, raw));
      this.#subscriptions.set(agent.id, pending);
      try {
        await pending;
      } catch (error) {
        this.#subscriptions.delete(agent.id);
        throw error;
      }
      if (this.#closed) (await pending)().catch(() => undefined);
    } else {
      await this.#subscriptions.get(agent.id);
    }
    this.#send({ type: "subscribed", agentId: agent.id, ...tag });
  }

  async #unsubscribe(message: v.InferOutput<typeof SubscribeMessage>): Promise<void> {
    const pending = this.#subscriptions.get(message.agentId);
    this.#subscriptions.delete(message.agentId);
    if (pending) await (await pending)();
    this.#send({ type: "unsubscribed", agentId: message.agentId, ...(message.id === undefined ? {} : { id: message.id }) });
  }

  #cancel(message: v.InferOutput<typeof CancelMessage>): void {
    const run = this.#runs.get(message.runId);
    // Only runs started on this socket can be cancelled from it.
    if (!run) throw new ServiceError("NOT_FOUND", `No run ${message.runId} on this socket`);
    run.controller.abort(new ServiceError("UNAVAILABLE", "Cancelled by the client"));
    this.#options.services.log.info({ requestId: this.#options.requestId, event: "agent_stream.run_cancelled", runId: message.runId, agentId: run.agentId, reason: "client_cancel" });
  }

  #fromBus(agentId: string, raw: unknown): void {
    const message = raw as Partial<AgentRunMessage> | null;
    if (!message || typeof message.runId !== "string" || typeof message.event !== "object" || message.event === null) return;
    const { runId, event } = message as AgentRunMessage;
    // After whatever is already queued: a run started here has registered its id by then.
    setImmediate(() => {
      if (this.#closed || this.#ownRuns.has(runId) || !this.#subscriptions.has(agentId)) return;
      this.#send(toFrame(runId, agentId, event, {}));
    });
  }

  #error(error: unknown, context: Record<string, unknown>): void {
    const serviceError = toServiceError(error);
    if (serviceError.code === "INTERNAL") {
      this.#options.services.log.error({ requestId: this.#options.requestId, event: "agent_stream.error", error: error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ""}` : String(error) });
    }
    this.#send({
      type: "error",
      ...context,
      code: serviceError.code,
      status: serviceError.status,
      message: serviceError.message,
      ...(serviceError.details === undefined ? {} : { details: serviceError.details }),
    });
  }

  #send(frame: Frame): void {
    if (this.#closed) return;
    this.#options.send(frame);
  }
}

/** One run event as a frame: `status`, `chunk`, `step`, `done`, each with runId and agentId. */
export function toFrame(runId: string, agentId: string, event: AgentEvent, tag: { id?: string }): Frame {
  const base = { runId, agentId, ...tag };
  switch (event.type) {
    case "status":
      return { type: "status", ...base, status: event.status };
    case "chunk":
      return { type: "chunk", ...base, content: event.content };
    case "step":
      return { type: "step", ...base, step: event.step };
    case "done": {
      const { result } = event;
      return {
        type: "done",
        ...base,
        status: result.status,
        output: result.output,
        steps: result.steps,
        usage: result.usage,
        ...(result.error ? { error: result.error } : {}),
      };
    }
    default:
      return { ...(event as unknown as Frame), ...base };
  }
}

function parse<T extends v.GenericSchema>(schema: T, value: unknown): v.InferOutput<T> {
  const result = v.safeParse(schema, value);
  if (result.success) return result.output;
  const issues = result.issues.map((issue) => ({ path: v.getDotPath(issue) ?? "", message: issue.message }));
  throw new ServiceError("VALIDATION_FAILED", issues.map((issue) => (issue.path ? `${issue.path}: ${issue.message}` : issue.message)).join("; "), { details: { issues } });
}
