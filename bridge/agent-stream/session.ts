import type { Presented, Principal } from "../../rpc/auth.js";
import { agentsCancel, agentsInvoke, agentsSubscribe } from "../../rpc/agents/methods.js";
import type { AgentEvent } from "../../rpc/agents/run.js";
import { isAsyncIterable, type MethodResult } from "../../rpc/define.js";
import { callFacts, fromWire, type CallFacts, type Dispatcher } from "../../rpc/dispatcher.js";
import { ServiceError } from "../../rpc/errors.js";
import type { Issue } from "../../rpc/validate.js";
import { renderError } from "../../rpc/surfaces.js";

/** Runs one socket may have going at once; past it, `RATE_LIMITED` error frames. */
export const MAX_RUNS_PER_SOCKET = 16;
/** Agents one socket may watch at once. */
export const MAX_SUBSCRIPTIONS_PER_SOCKET = 32;

export type Frame = Record<string, unknown> & { type: string };

export interface SessionOptions {
  dispatcher: Dispatcher;
  principal: Principal;
  /** The upgrade's credentials, presented again with every call the socket makes. */
  presented: Presented;
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

/** The message fields of the socket and the method params they become (docs/interface.md 2.7 messages). */
const FIELD_NAMES: Record<string, string> = { agent_id: "agentId", run_id: "runId" };

type Message = Record<string, unknown> & { id?: unknown; type?: unknown };

/**
 * One agent-stream socket (docs/agents-stream.md), a codec over registry methods: `invoke`
 * is `agents.invoke` (streamed), `subscribe` is `agents.subscribe`, `cancel` is
 * `agents.cancel`, each through the dispatcher with the socket's credentials. Runs are framed
 * with their `runId` so many share the socket; errors are `error` frames, never a dropped
 * socket. Closing cancels the runs it started and ends its subscriptions.
 */
export class AgentStreamSession {
  readonly #options: SessionOptions;
  readonly #runs = new Map<string, LocalRun>();
  /** Runs started here: their events reach the socket directly, not again through a subscription. */
  readonly #ownRuns = new Set<string>();
  readonly #subscriptions = new Map<string, { controller: AbortController; ready: Promise<void> }>();
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
      return this.#error(
        new ServiceError("BAD_REQUEST", 'Message must be a JSON object: {agentId, input} or {type: "subscribe", agentId}'),
        {},
      );
    }
    const record = message as Message;
    const tag = typeof record.id === "string" ? { id: record.id } : {};
    if (this.#options.orchestratorMode) {
      return this.#error(
        new ServiceError(
          "UNAVAILABLE",
          "Agents run in the orchestrator in this deployment; stream one with GET /gateway/v1/agents/{name}/stream",
        ),
        tag,
      );
    }
    try {
      if (record.id !== undefined && (typeof record.id !== "string" || record.id.length > 128)) {
        throw new ServiceError("VALIDATION_FAILED", "Invalid request: id: a string of at most 128 characters", {
          details: { issues: [{ path: "id", message: "a string of at most 128 characters" }] },
        });
      }
      switch (record.type) {
        case undefined:
        case "invoke":
          return await this.#invoke(record, tag);
        case "subscribe":
          return await this.#subscribe(record, tag);
        case "unsubscribe":
          return await this.#unsubscribe(record, tag);
        case "cancel":
          return await this.#cancel(record);
        default:
          throw new ServiceError(
            "BAD_REQUEST",
            `Unknown message type: ${JSON.stringify(record.type)}; use invoke (default), subscribe, unsubscribe or cancel`,
          );
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
      this.#log({ event: "agent_stream.run_cancelled", runId, agentId: run.agentId, reason: "client_disconnected", closeCode: code });
    }
    this.#runs.clear();
    for (const { controller } of this.#subscriptions.values()) controller.abort();
    this.#subscriptions.clear();
  }

  /** The facts of one call the socket makes: its credentials again, its request id. */
  #facts(signal: AbortSignal): CallFacts {
    return callFacts({
      requestId: this.#options.requestId,
      surface: "gateway",
      transport: "socket",
      presented: this.#options.presented,
      signal,
    });
  }

  async #invoke(message: Message, tag: { id?: string }): Promise<void> {
    if (this.#runs.size + this.#starting >= MAX_RUNS_PER_SOCKET) {
      throw new ServiceError(
        "RATE_LIMITED",
        `At most ${MAX_RUNS_PER_SOCKET} runs at once on one socket; wait for a done frame or open another socket`,
      );
    }
    const controller = new AbortController();
    this.#starting += 1;
    let started: MethodResult<typeof agentsInvoke>;
    try {
      // The message's fields as they came: the method checks them (agentId, input).
      started = await this.#options.dispatcher.call(
        agentsInvoke,
        fromWire({ agent_id: message.agentId, input: message.input, stream: true }),
        this.#facts(controller.signal),
      );
    } finally {
      this.#starting -= 1;
    }
    // `stream: true` answers with the run's events.
    if (!isAsyncIterable(started)) throw new ServiceError("INTERNAL", "agents.invoke did not stream");
    const events = started;
    const agentId = message.agentId as string;
    let runId: string | undefined;
    try {
      for await (const { runId: id, ...event } of events) {
        if (runId === undefined) {
          runId = id;
          this.#started(runId, agentId, controller);
        }
        this.#send(toFrame(runId, agentId, event, tag));
      }
    } catch (error) {
      this.#error(error, { ...tag, ...(runId ? { runId } : {}), agentId });
    } finally {
      if (runId !== undefined) {
        const ended = runId;
        this.#runs.delete(ended);
        // Kept a moment longer so a late bus copy of the last event is still recognised.
        setTimeout(() => this.#ownRuns.delete(ended), 5_000).unref();
      }
    }
  }

  #started(runId: string, agentId: string, controller: AbortController): void {
    this.#ownRuns.add(runId);
    this.#log({ event: "agent_stream.run_started", runId, agentId, principal: { userId: this.#options.principal.userId } });
    if (this.#closed) {
      // The socket closed while the run was starting: nobody will read it.
      controller.abort(new ServiceError("UNAVAILABLE", "The agent stream client disconnected"));
      this.#log({ event: "agent_stream.run_cancelled", runId, agentId, reason: "client_disconnected" });
    } else {
      this.#runs.set(runId, { agentId, controller });
    }
  }

  async #subscribe(message: Message, tag: { id?: string }): Promise<void> {
    const agentId = message.agentId;
    const existing = typeof agentId === "string" ? this.#subscriptions.get(agentId) : undefined;
    if (existing) {
      await existing.ready;
      this.#send({ type: "subscribed", agentId: agentId as string, ...tag });
      return;
    }
    if (this.#subscriptions.size >= MAX_SUBSCRIPTIONS_PER_SOCKET) {
      throw new ServiceError("RATE_LIMITED", `At most ${MAX_SUBSCRIPTIONS_PER_SOCKET} subscriptions on one socket`);
    }
    const controller = new AbortController();
    let markReady!: () => void;
    const ready = new Promise<void>((resolve) => (markReady = resolve));
    const events = await this.#options.dispatcher.call(agentsSubscribe, fromWire({ agent_id: agentId }), this.#facts(controller.signal));
    if (this.#closed) return void controller.abort();
    const id = agentId as string;
    this.#subscriptions.set(id, { controller, ready });
    void (async () => {
      try {
        for await (const event of events) {
          if (event.type === "subscribed") {
            markReady();
            this.#send({ type: "subscribed", agentId: event.agentId, ...tag });
            continue;
          }
          const { runId, ...rest } = event;
          // After whatever is already queued: a run started here has registered its id by then.
          setImmediate(() => {
            if (this.#closed || this.#ownRuns.has(runId) || this.#subscriptions.get(id)?.controller !== controller) return;
            this.#send(toFrame(runId, id, rest, {}));
          });
        }
      } catch (error) {
        this.#error(error, { ...tag, agentId: id });
      } finally {
        markReady();
      }
    })();
  }

  async #unsubscribe(message: Message, tag: { id?: string }): Promise<void> {
    if (typeof message.agentId !== "string") {
      throw new ServiceError("VALIDATION_FAILED", "Invalid request: agentId is required", {
        details: { issues: [{ path: "agentId", message: "agentId is required" }] },
      });
    }
    const subscription = this.#subscriptions.get(message.agentId);
    this.#subscriptions.delete(message.agentId);
    subscription?.controller.abort();
    this.#send({ type: "unsubscribed", agentId: message.agentId, ...tag });
  }

  async #cancel(message: Message): Promise<void> {
    const result = await this.#options.dispatcher.call(
      agentsCancel,
      fromWire({ run_id: message.runId }),
      this.#facts(new AbortController().signal),
    );
    this.#log({ event: "agent_stream.run_cancelled", runId: result.runId, agentId: result.agentId, reason: "client_cancel" });
  }

  /** An error frame: masked and logged like every transport (renderError), then framed. */
  #error(error: unknown, context: Record<string, unknown>): void {
    const { error: rendered } = renderError("gateway", error, this.#options.requestId, this.#options.dispatcher.ports.log);
    // The socket's messages name fields agentId and runId where the methods say agent_id and run_id.
    const rename = (text: string) => text.replace(/\b(agent_id|run_id)\b/g, (name) => FIELD_NAMES[name]!);
    const details =
      rendered.code === "VALIDATION_FAILED" && rendered.details && typeof rendered.details === "object"
        ? {
            ...(rendered.details as object),
            issues: ((rendered.details as { issues?: Issue[] }).issues ?? []).map((issue) => ({
              ...issue,
              path: rename(issue.path),
              message: rename(issue.message),
            })),
          }
        : rendered.details;
    this.#send({
      type: "error",
      ...context,
      code: rendered.code,
      status: rendered.status,
      message: rendered.code === "VALIDATION_FAILED" ? rename(rendered.message) : rendered.message,
      ...(details === undefined ? {} : { details }),
    });
  }

  #log(fields: Record<string, unknown>): void {
    this.#options.dispatcher.ports.log.info({ requestId: this.#options.requestId, ...fields });
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
