import type { Logger } from "./log.js";
import type { EventLog, EventRecord, PublishInput } from "../storage/events/event-log.js";
import type { UsersRepo } from "../storage/repos/users.js";

/** Told of each event once it is on the bus (the webhooks domain fans it out to subscriptions). */
export type EventListener = (event: EventRecord) => Promise<unknown>;

/**
 * Publishes the service's events (docs/events.md): puts each on the bus, then hands it to every
 * listener a domain registered (`onPublished`), awaited, so an event published through the API
 * has its webhook deliveries queued when the call answers.
 */
export class EventSink {
  readonly #log: EventLog;
  readonly #logger: Logger;
  readonly #listeners: EventListener[] = [];
  /** Publishes started by `emit`, not yet on the bus (awaited by `drain`). */
  readonly #pending = new Set<Promise<unknown>>();

  constructor(log: EventLog, logger: Logger) {
    this.#log = log;
    this.#logger = logger;
  }

  onPublished(listener: EventListener): void {
    this.#listeners.push(listener);
  }

  async publish(input: PublishInput): Promise<EventRecord> {
    const event = await this.#log.publish(input);
    for (const listener of this.#listeners) await listener(event);
    return event;
  }

  /**
   * The service's own events (docs/events.md "Catalog"): one call at each place that emits one.
   * The topic is the type's first segment (`agent.created` → `agent`). Publishing never fails
   * the operation that emits: a bus error is logged and dropped.
   */
  emit(tenantId: string | undefined, type: string, data: Record<string, unknown>): void {
    if (!tenantId) return;
    const topic = type.split(".")[0]!;
    this.#track(
      this.publish({ tenantId, topic, type, source: "gateway", payload: data }).catch((error: unknown) => {
        this.#logger.error({ msg: "event not published", type, tenantId, error: String((error as Error)?.message ?? error) });
      }),
    );
  }

  /** `emit` under the user's personal tenant (keys belong to a user, not to a tenant). */
  emitForUser(users: UsersRepo, userId: string, type: string, data: Record<string, unknown>): void {
    this.#track(
      users.get(userId).then(
        (user) => this.emit(user?.tenantId, type, data),
        () => undefined,
      ),
    );
  }

  /**
   * Waits until every event `emit` started is on the bus (or its failure logged), including
   * those emitted meanwhile: the composition calls it on close, so a short-lived process (the
   * admin command) writes its events before it exits.
   */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  #track(publishing: Promise<unknown>): void {
    this.#pending.add(publishing);
    const done = () => void this.#pending.delete(publishing);
    publishing.then(done, done);
  }
}

/** `deps.sink.emit(...)`, for code that holds a domain's deps. */
export function emitEvent(deps: { sink: EventSink }, tenantId: string | undefined, type: string, data: Record<string, unknown>): void {
  deps.sink.emit(tenantId, type, data);
}

/** `deps.sink.emitForUser(...)`, for code that holds a domain's deps. */
export function emitUserEvent(
  deps: { sink: EventSink; users: UsersRepo },
  userId: string,
  type: string,
  data: Record<string, unknown>,
): void {
  deps.sink.emitForUser(deps.users, userId, type, data);
}
