import * as v from "valibot";
import { isServiceError, ServiceError } from "../errors.js";
import { queryInt } from "../validate.js";
import type { Principal } from "../auth.js";
import type { EventRecord, LeasedEvent, SettleResult } from "../../storage/events/event-log.js";
import { requireTenantAccess, TENANT_ACCESS, tenantOrPersonal, type Role } from "../tenants/access.js";
import { eventsDomain, type EventsContext, type EventsDeps } from "./deps.js";
import { SpanKind, startSpan, tracingEnabled } from "../tracing.js";

/**
 * Each leased event: its lag since publication (`gateway_event_consume_lag_seconds`, by group:
 * a bounded label, as tenants choose the names, rpc/metrics.ts lagGroup) and, while tracing, a
 * span per event under the call's (its id, type, topic, group, delivery count; never its payload).
 */
function consumed(ctx: EventsContext, tenantId: string, consumer: string, leases: LeasedEvent[]): void {
  const now = Date.now();
  for (const lease of leases) {
    const delivery = lease.deliveryCount > 1 ? "redelivery" : "first";
    const group = ctx.deps.metrics.lagGroup(tenantId, consumer);
    ctx.deps.metrics.eventLag.observe({ group, delivery }, Math.max(0, now - Date.parse(lease.event.createdAt)) / 1000);
    if (!tracingEnabled()) continue;
    startSpan(`process ${lease.event.topic}`, SpanKind.CONSUMER, {
      "messaging.system": "gateway",
      "messaging.operation.type": "process",
      "messaging.destination.name": lease.event.topic,
      "messaging.consumer.group.name": consumer,
      "messaging.message.id": lease.event.id,
      "gateway.event.type": lease.event.type,
      "gateway.event.delivery_count": lease.deliveryCount,
      "gateway.tenant_id": tenantId,
    })?.end();
  }
}

const AUTH = { kinds: ["session", "gateway_key"] } as const;

/** Dotted lowercase names (issue 10): `agent.created`, `orders`. */
const Dotted = (field: string) =>
  v.pipe(
    v.string(`${field} must be a string`),
    v.maxLength(100, `${field}: at most 100 characters`),
    v.regex(/^[a-z0-9]+(\.[a-z0-9_-]+)*$/, `${field}: dotted lowercase name such as agent.created`),
  );
/** Consumer group names become storage key segments and Redis group names. */
const Consumer = v.pipe(
  v.string("consumer must be a string"),
  v.regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, "consumer: a letter or digit, then letters, digits, _ . - (1-64)"),
);
const TenantId = v.pipe(v.string("tenantId must be a string"), v.minLength(1), v.maxLength(128));
const EventId = v.pipe(v.string(), v.minLength(1), v.maxLength(128));

const EventView = v.object({
  id: v.string(),
  tenantId: v.string(),
  topic: v.string(),
  type: v.string(),
  source: v.string(),
  payload: v.record(v.string(), v.unknown()),
  createdAt: v.string(),
});

const Page = <T extends v.GenericSchema>(item: T) => v.object({ data: v.array(item), nextCursor: v.nullable(v.string()) });
const Settled = (status: string) => v.object({ id: v.string(), consumer: v.string(), status: v.pipe(v.string(), v.description(status)) });

/** An event of a tenant the caller reaches; anything else is the same 404 as an unknown id. */
async function reachableEvent(deps: EventsDeps, principal: Principal, id: string, need: Role = "member"): Promise<EventRecord> {
  const event = await deps.events.get(id);
  const notFound = new ServiceError("NOT_FOUND", `Event not found: ${id}`);
  if (!event) throw notFound;
  try {
    await requireTenantAccess(deps, principal, event.tenantId, need);
  } catch (error) {
    // A member without the role gets 403; anyone else the same 404 as a missing event.
    if (isServiceError(error) && error.code === "FORBIDDEN") throw error;
    throw notFound;
  }
  return event;
}

/**
 * The consumer group an ack or nack without `consumer` settles (docs/interface.md 6 shows no payload): the
 * one group holding a lease on the event. None: 409 (nothing to settle); several: 400 asking
 * for `consumer` (docs/events.md "Ack and nack without a body").
 */
async function soleLeaseHolder(deps: Pick<EventsDeps, "events">, eventId: string): Promise<string> {
  const holders = await deps.events.leaseHolders(eventId);
  if (holders.length === 1) return holders[0]!;
  if (holders.length === 0) {
    throw new ServiceError("CONFLICT", `No consumer group holds a lease on event ${eventId}: consume it first, or name the consumer`, {
      details: { reason: "not_leased", eventId },
    });
  }
  throw new ServiceError(
    "BAD_REQUEST",
    `Event ${eventId} is leased to ${holders.length} consumer groups (${holders.join(", ")}): say which in \`consumer\``,
    {
      details: { eventId, consumers: holders },
    },
  );
}

/** docs/events.md "Answers": why an ack, nack or requeue did not apply. */
function settleError(result: SettleResult, id: string, consumer: string): ServiceError {
  const messages: Record<Exclude<SettleResult, "ok">, string> = {
    unknown: `Event not found: ${id}`,
    acked: `Event ${id} is already acknowledged by consumer ${consumer}`,
    dead: `Event ${id} is dead-lettered for consumer ${consumer}; requeue it first`,
    not_leased: `Consumer ${consumer} holds no lease on event ${id} (never delivered to it, or nacked and waiting)`,
    lease_moved: `The lease on event ${id} is no longer current: it expired and went to another consumer of ${consumer}`,
    not_dead: `Event ${id} is not dead-lettered for consumer ${consumer}`,
  };
  const message = messages[result as Exclude<SettleResult, "ok">];
  return result === "unknown"
    ? new ServiceError("NOT_FOUND", message)
    : new ServiceError("CONFLICT", message, { details: { reason: result, eventId: id, consumer } });
}

export const eventMethods = [
  eventsDomain.method({
    name: "events.publish",
    summary: "Publish an event on a tenant's bus (docs/events.md); matching webhook subscriptions get a delivery.",
    input: v.object({
      tenantId: v.optional(TenantId),
      topic: Dotted("topic"),
      type: Dotted("type"),
      source: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(200)), "api"),
      payload: v.optional(
        v.pipe(
          v.custom<Record<string, unknown>>(
            (value) => typeof value === "object" && value !== null && !Array.isArray(value),
            "payload must be a JSON object",
          ),
          v.record(v.string(), v.unknown()),
        ),
        {},
      ),
    }),
    auth: AUTH,
    output: EventView,
    errors: { NOT_FOUND: {}, PAYLOAD_TOO_LARGE: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: "/events", status: 201 }],
    async handler(params, ctx) {
      const tenant = await tenantOrPersonal(ctx.deps, ctx.principal, params.tenantId, TENANT_ACCESS.publish);
      const size = Buffer.byteLength(JSON.stringify(params.payload));
      const limit = ctx.deps.config.EVENTS_MAX_PAYLOAD_BYTES;
      if (size > limit)
        throw new ServiceError("PAYLOAD_TOO_LARGE", `payload is ${size} bytes; the limit is ${limit} (EVENTS_MAX_PAYLOAD_BYTES)`, {
          details: { size, limit },
        });
      return ctx.deps.sink.publish({
        tenantId: tenant.id,
        topic: params.topic,
        type: params.type,
        source: params.source,
        payload: params.payload,
      });
    },
  }),

  eventsDomain.method({
    name: "events.list",
    summary: "A tenant's events, newest first, with a cursor; `status=dead` lists dead letters with their reason instead.",
    input: v.object({
      tenantId: v.optional(TenantId),
      topic: v.optional(Dotted("topic")),
      type: v.optional(Dotted("type")),
      since: v.optional(v.pipe(v.string(), v.isoTimestamp("since must be an ISO 8601 timestamp"))),
      limit: v.optional(queryInt(1, 500), 50),
      cursor: v.optional(v.pipe(v.string(), v.maxLength(64))),
      status: v.optional(v.picklist(["all", "dead"], "status must be all or dead"), "all"),
      consumer: v.optional(Consumer),
    }),
    auth: AUTH,
    output: Page(
      v.object({
        ...EventView.entries,
        status: v.optional(v.string()),
        consumer: v.optional(v.string()),
        deliveries: v.optional(v.number()),
        reason: v.optional(v.string()),
        deadAt: v.optional(v.string()),
      }),
    ),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/events" }],
    async handler(params, ctx) {
      const tenant = await tenantOrPersonal(ctx.deps, ctx.principal, params.tenantId);
      if (params.status === "dead") {
        const dead = await ctx.deps.events.deadLetters({
          tenantId: tenant.id,
          consumer: params.consumer,
          topic: params.topic,
          limit: params.limit,
        });
        return {
          data: dead.map((letter) => ({
            ...letter.event,
            status: "dead",
            consumer: letter.consumer,
            deliveries: letter.deliveries,
            reason: letter.reason,
            deadAt: letter.deadAt,
          })),
          nextCursor: null,
        };
      }
      const page = await ctx.deps.events.list({
        tenantId: tenant.id,
        topic: params.topic,
        type: params.type,
        since: params.since ? Date.parse(params.since) : undefined,
        limit: params.limit,
        cursor: params.cursor,
      });
      return { data: page.events, nextCursor: page.nextCursor };
    },
  }),

  eventsDomain.method({
    name: "events.consume",
    summary:
      "Lease up to `max` events of a topic not yet acknowledged by the consumer group `consumer` (at least once; two " +
      "callers of one group never hold the same event at once).",
    input: v.object({
      tenantId: v.optional(TenantId),
      topic: Dotted("topic"),
      consumer: Consumer,
      max: v.optional(queryInt(1, 100), 10),
      leaseSeconds: v.optional(queryInt(1, 43_200), 30),
    }),
    auth: AUTH,
    output: v.object({
      consumer: v.string(),
      data: v.array(v.object({ ...EventView.entries, leaseId: v.string(), deliveryCount: v.number(), leaseExpiresAt: v.string() })),
    }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: "/events/consume" }],
    async handler(params, ctx) {
      const tenant = await tenantOrPersonal(ctx.deps, ctx.principal, params.tenantId, TENANT_ACCESS.use);
      const leases = await ctx.deps.events.consume({
        tenantId: tenant.id,
        topic: params.topic,
        consumer: params.consumer,
        max: params.max,
        leaseMs: params.leaseSeconds * 1000,
      });
      consumed(ctx, tenant.id, params.consumer, leases);
      return {
        consumer: params.consumer,
        data: leases.map((lease) => ({
          ...lease.event,
          leaseId: lease.leaseId,
          deliveryCount: lease.deliveryCount,
          leaseExpiresAt: new Date(lease.leaseExpiresAt).toISOString(),
        })),
      };
    },
  }),

  eventsDomain.method({
    name: "events.ack",
    summary:
      "Finish an event for a consumer group. Without a body (no `consumer`) it settles the one lease held on the " +
      "event; with leases of several groups `consumer` says which (400 otherwise). 409 when already acknowledged, " +
      "dead-lettered, not leased, or when `leaseId` is no longer current; 404 when unknown.",
    input: v.object({ event_id: EventId, consumer: v.optional(Consumer), leaseId: v.optional(v.pipe(v.string(), v.maxLength(64))) }),
    auth: AUTH,
    output: Settled("acked"),
    errors: { NOT_FOUND: {}, CONFLICT: {}, FORBIDDEN: {}, BAD_REQUEST: {} },
    http: [{ surface: "gateway", method: "POST", path: "/events/:event_id/ack" }],
    async handler(params, ctx) {
      const event = await reachableEvent(ctx.deps, ctx.principal, params.event_id);
      const consumer = params.consumer ?? (await soleLeaseHolder(ctx.deps, event.id));
      const result = await ctx.deps.events.ack({ id: event.id, consumer, leaseId: params.leaseId });
      if (result !== "ok") throw settleError(result, event.id, consumer);
      return { id: event.id, consumer, status: "acked" };
    },
  }),

  eventsDomain.method({
    name: "events.nack",
    summary:
      "Give a leased event back to its consumer group, available again after `delaySeconds` (default 0); past " +
      "EVENTS_MAX_DELIVERIES it is dead-lettered. Without `consumer`, the one lease held on the event (as for ack).",
    input: v.object({
      event_id: EventId,
      consumer: v.optional(Consumer),
      leaseId: v.optional(v.pipe(v.string(), v.maxLength(64))),
      delaySeconds: v.optional(queryInt(0, 43_200), 0),
    }),
    auth: AUTH,
    output: Settled("nacked"),
    errors: { NOT_FOUND: {}, CONFLICT: {}, FORBIDDEN: {}, BAD_REQUEST: {} },
    http: [{ surface: "gateway", method: "POST", path: "/events/:event_id/nack" }],
    async handler(params, ctx) {
      const event = await reachableEvent(ctx.deps, ctx.principal, params.event_id);
      const consumer = params.consumer ?? (await soleLeaseHolder(ctx.deps, event.id));
      const result = await ctx.deps.events.nack({ id: event.id, consumer, leaseId: params.leaseId, delayMs: params.delaySeconds * 1000 });
      if (result !== "ok") throw settleError(result, event.id, consumer);
      return { id: event.id, consumer, status: "nacked" };
    },
  }),

  eventsDomain.method({
    name: "events.requeue",
    summary: "Put a dead-lettered event back in its consumer group's queue with a fresh delivery count.",
    input: v.object({ event_id: EventId, consumer: Consumer }),
    auth: AUTH,
    output: Settled("requeued"),
    errors: { NOT_FOUND: {}, CONFLICT: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: "/events/:event_id/requeue" }],
    async handler(params, ctx) {
      const event = await reachableEvent(ctx.deps, ctx.principal, params.event_id);
      const result = await ctx.deps.events.requeue({ id: event.id, consumer: params.consumer });
      if (result !== "ok") throw settleError(result, event.id, params.consumer);
      return { id: event.id, consumer: params.consumer, status: "requeued" };
    },
  }),
];
