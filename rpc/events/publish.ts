import type { Logger } from "../log.js";
import type { WebhookWorker } from "../webhooks/worker.js";
import type { EventLog, EventRecord, PublishInput } from "../../storage/events/event-log.js";
import type { UsersRepo } from "../../storage/repos/users.js";

/** What publishing needs of the services (kept narrow so the composition root can hand it to the bridge). */
export interface EventSink {
  events: EventLog;
  webhookWorker: Pick<WebhookWorker, "fanOut">;
  log: Logger;
}

/** Puts an event on the bus and hands it to the tenant's matching webhook subscriptions. */
export async function publishEvent(services: EventSink, input: PublishInput): Promise<EventRecord> {
  const event = await services.events.publish(input);
  await services.webhookWorker.fanOut(event);
  return event;
}

/**
 * The service's own events (docs/events.md "Catalog"): one call at each place that emits one.
 * The topic is the type's first segment (`agent.created` → `agent`). Publishing never fails
 * the operation that emits: a bus error is logged and dropped.
 */
export function emitEvent(services: EventSink, tenantId: string | undefined, type: string, data: Record<string, unknown>): void {
  if (!tenantId) return;
  const topic = type.split(".")[0]!;
  void publishEvent(services, { tenantId, topic, type, source: "gateway", payload: data }).catch((error: unknown) => {
    services.log.error({ msg: "event not published", type, tenantId, error: String((error as Error)?.message ?? error) });
  });
}

/** emitEvent under the user's personal tenant (keys belong to a user, not to a tenant). */
export function emitUserEvent(services: EventSink & { users: UsersRepo }, userId: string, type: string, data: Record<string, unknown>): void {
  void services.users.get(userId).then(
    (user) => emitEvent(services, user?.tenantId, type, data),
    () => undefined,
  );
}
