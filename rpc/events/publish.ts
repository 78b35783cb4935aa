import type { Services } from "../services.js";
import type { EventRecord, PublishInput } from "../../storage/events/event-log.js";

/** Puts an event on the bus and hands it to the tenant's matching webhook subscriptions. */
export async function publishEvent(services: Services, input: PublishInput): Promise<EventRecord> {
  const event = await services.events.publish(input);
  await services.webhookWorker.fanOut(event);
  return event;
}

/**
 * The service's own events (docs/events.md "Catalog"): one call at each place that emits one.
 * The topic is the type's first segment (`agent.created` → `agent`). Publishing never fails
 * the operation that emits: a bus error is logged and dropped.
 */
export function emitEvent(services: Services, tenantId: string | undefined, type: string, data: Record<string, unknown>): void {
  if (!tenantId) return;
  const topic = type.split(".")[0]!;
  void publishEvent(services, { tenantId, topic, type, source: "gateway", payload: data }).catch((error: unknown) => {
    services.log.error({ msg: "event not published", type, tenantId, error: String((error as Error)?.message ?? error) });
  });
}

/** emitEvent under the user's personal tenant (keys belong to a user, not to a tenant). */
export function emitUserEvent(services: Services, userId: string, type: string, data: Record<string, unknown>): void {
  void services.users.get(userId).then(
    (user) => emitEvent(services, user?.tenantId, type, data),
    () => undefined,
  );
}
