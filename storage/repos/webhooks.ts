import { Collection } from "../collection.js";
import type { Store } from "../store.js";
import type { EventRecord } from "../events/event-log.js";
import { QUEUES } from "../layout.js";

export interface WebhookSubscription {
  id: string;
  tenantId: string;
  url: string;
  /** Topic or type patterns: `*`, `agent.*`, `agent.created`. */
  filter: string[];
  description: string;
  enabled: boolean;
  /** The signing secret `whsec_…`, sealed (SecretBox): Standard Webhooks needs it to sign. */
  secret: string;
  /** After a rotation the old secret also signs until `previousUntil` (sealed). */
  previousSecret?: string;
  previousUntil?: string;
  createdAt: string;
  updatedAt: string;
}

export interface DeliveryAttempt {
  at: string;
  statusCode: number | null;
  durationMs: number;
  error?: string;
  /** The first bytes of the receiver's answer. */
  response?: string;
}

export interface WebhookDelivery {
  id: string;
  tenantId: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  /** The exact JSON body sent on every attempt (signed per attempt). */
  body: string;
  status: "pending" | "succeeded" | "failed";
  attempts: DeliveryAttempt[];
  nextAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
  /** The span that published the event, while tracing: each attempt's span continues its trace. Never shown. */
  traceparent?: string;
}

interface Owner {
  tenantId: string;
}

/**
 * An event still to be fanned out to its tenant's subscriptions: stored when the event is
 * published (one write, whatever the number of subscriptions), then advanced a page of
 * subscriptions at a time, each page's deliveries written in the same step as the job's
 * cursor, and removed with the last page's. A job whose instance died is taken over from its
 * cursor when its claim expires.
 */
export interface FanOutJob {
  eventId: string;
  tenantId: string;
  /** The event as published (what each delivery's body carries). */
  event: EventRecord;
  createdAt: string;
  /** The span that published the event, while tracing (handed to each delivery). */
  traceparent?: string;
  /** The last subscription id whose deliveries are stored (absent before the first page). */
  after?: string;
}

/** A pending delivery as the due queue names it. */
export interface DueDelivery {
  id: string;
  tenantId: string;
  /** When its next attempt is due (epoch ms). */
  dueAt: number;
}

/**
 * Webhook subscriptions and deliveries, under their tenant (listed by tenant:
 * storage/layout.ts), with an owner record by id for routes that take only an id, and two
 * queues every instance polls by score (storage/layout.ts QUEUES): pending deliveries by the
 * time their next attempt is due, and fan-outs still to run by the time another instance may
 * take them over. A delivery's record, its index entries and its place in the due queue
 * change in one atomic step (docs/webhooks.md "Storage").
 */
export class WebhooksRepo {
  readonly #subs: Collection<WebhookSubscription>;
  readonly #subOwners: Collection<Owner>;
  readonly #deliveries: Collection<WebhookDelivery>;
  readonly #deliveryOwners: Collection<Owner>;
  readonly #fanOuts: Collection<FanOutJob>;
  readonly #atomic: Store["atomic"];
  readonly #indexes: Store["indexes"];

  constructor(store: Store) {
    this.#atomic = store.atomic;
    this.#indexes = store.indexes;
    this.#subs = new Collection(store, "webhook-subs");
    this.#subOwners = new Collection(store, "webhook-sub-owners");
    this.#deliveries = new Collection(store, "webhook-deliveries");
    this.#deliveryOwners = new Collection(store, "webhook-delivery-owners");
    this.#fanOuts = new Collection(store, "webhook-fanouts");
  }

  /** Stores a fan-out job, due for another instance at `takeOverAt` (epoch ms) unless it is done by then. */
  putFanOut(job: FanOutJob, takeOverAt: number) {
    return this.#indexes.write([
      ...this.#fanOuts.putChanges([job.eventId], job),
      { op: "index", index: QUEUES.webhookFanOuts, member: job.eventId, score: takeOverAt },
    ]);
  }

  /** Fan-outs whose publisher had time to run them and did not finish (it died): up to `limit`, oldest first. */
  async fanOutsDue(now: number, limit: number): Promise<FanOutJob[]> {
    const due = await this.#indexes.upTo(QUEUES.webhookFanOuts, now, limit);
    return this.#fanOuts.getMany(due.map(({ member }) => this.#fanOuts.key(member)));
  }

  /** Claims the fan-out of one event for `holder` for `ttlMs` (renewed while it runs). */
  claimFanOut(eventId: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.setIfAbsent(`webhook-fanout:${eventId}`, holder, ttlMs);
  }

  renewFanOut(eventId: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.compareAndSet(`webhook-fanout:${eventId}`, holder, holder, ttlMs);
  }

  /**
   * One step of a fan-out, atomically: these deliveries (records, owner and tenant entries,
   * places in the due queue), and the job advanced to `after` or, with `after` null, removed.
   */
  async storeFanOutStep(job: FanOutJob, deliveries: WebhookDelivery[], after: string | null): Promise<void> {
    const changes = deliveries.flatMap((delivery) => this.#deliveryChanges(delivery, true));
    if (after === null) {
      changes.push(...this.#fanOuts.removeChanges([job.eventId]), { op: "unindex", index: QUEUES.webhookFanOuts, member: job.eventId });
    } else {
      job.after = after;
      changes.push(...this.#fanOuts.putChanges([job.eventId], job));
    }
    await this.#indexes.write(changes);
  }

  /** A subscription and its owner record, in one step. */
  async putSubscription(sub: WebhookSubscription) {
    await this.#indexes.write([
      ...this.#subOwners.putChanges([sub.id], { tenantId: sub.tenantId }),
      ...this.#subs.putChanges([sub.tenantId, sub.id], sub),
    ]);
    return sub;
  }

  async getSubscription(id: string): Promise<WebhookSubscription | null> {
    if (!Collection.validId(id)) return null;
    const owner = await this.#subOwners.get(id);
    return owner ? this.#subs.get(owner.tenantId, id) : null;
  }

  listSubscriptions(tenantId: string) {
    return this.#subs.list(tenantId);
  }

  /** How many subscriptions a tenant has (its index's size, no record read). */
  countSubscriptions(tenantId: string): Promise<number> {
    return this.#subs.count(tenantId);
  }

  /** Up to `size` of a tenant's subscriptions after the id `after`, in id order (a fan-out's page). */
  async subscriptionPage(
    tenantId: string,
    after: string | undefined,
    size: number,
  ): Promise<{ subs: WebhookSubscription[]; last?: string; more: boolean }> {
    const ids = await this.#subs.ids([tenantId], { ...(after !== undefined ? { after } : {}), limit: size });
    const subs = await this.#subs.getMany(ids.map((id) => this.#subs.key(tenantId, id)));
    return { subs, ...(ids.length ? { last: ids[ids.length - 1] } : {}), more: ids.length === size };
  }

  async removeSubscription(sub: WebhookSubscription) {
    await this.#indexes.write([...this.#subs.removeChanges([sub.tenantId, sub.id]), ...this.#subOwners.removeChanges([sub.id])]);
  }

  /** Stores a new delivery (record, owner and tenant entries, due queue), in one step. */
  async putDelivery(delivery: WebhookDelivery) {
    await this.#indexes.write(this.#deliveryChanges(delivery, true));
    return delivery;
  }

  /** Writes a delivery already stored: an attempt's outcome, with its place in the due queue, in one step. */
  async updateDelivery(delivery: WebhookDelivery) {
    await this.#indexes.write(this.#deliveryChanges(delivery, false));
    return delivery;
  }

  #deliveryChanges(delivery: WebhookDelivery, created: boolean) {
    const member = `${delivery.tenantId}:${delivery.id}`;
    const pending = delivery.status === "pending" && delivery.nextAttemptAt;
    const record = this.#deliveries.putChanges([delivery.tenantId, delivery.id], delivery);
    return [
      // An update rewrites the record only: its owner and tenant entries are there already.
      ...(created ? [...this.#deliveryOwners.putChanges([delivery.id], { tenantId: delivery.tenantId }), ...record] : record.slice(0, 1)),
      pending
        ? ({ op: "index", index: QUEUES.webhookDue, member, score: Date.parse(delivery.nextAttemptAt!) } as const)
        : ({ op: "unindex", index: QUEUES.webhookDue, member } as const),
    ];
  }

  async getDelivery(id: string): Promise<WebhookDelivery | null> {
    if (!Collection.validId(id)) return null;
    const owner = await this.#deliveryOwners.get(id);
    return owner ? this.#deliveries.get(owner.tenantId, id) : null;
  }

  /** The ids among `ids` of deliveries the tenant has stored (one read). */
  async storedDeliveryIds(tenantId: string, ids: string[]): Promise<Set<string>> {
    const found = await this.#deliveries.getMany(ids.map((id) => this.#deliveries.key(tenantId, id)));
    return new Set(found.map((delivery) => delivery.id));
  }

  listDeliveries(tenantId: string) {
    return this.#deliveries.list(tenantId);
  }

  /** Pending deliveries due at or before `now` (id and tenant), earliest first, up to `limit`: the due queue polled by score. */
  async due(now: number, limit: number): Promise<DueDelivery[]> {
    const entries = await this.#indexes.upTo(QUEUES.webhookDue, now, limit);
    return entries.map(({ member, score }) => {
      const [tenantId, id] = member.split(":") as [string, string];
      return { id, tenantId, dueAt: score };
    });
  }

  /**
   * Claims attempt number `attempt` of a delivery for `holder` for `ttlMs`: exactly one
   * instance wins; a holder that dies releases it when the claim expires.
   */
  claimAttempt(id: string, attempt: number, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.setIfAbsent(`webhook-attempt:${id}:${attempt}`, holder, ttlMs);
  }

  /** Extends a claim this holder still has; false when it expired and may be another's now. */
  renewAttempt(id: string, attempt: number, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.compareAndSet(`webhook-attempt:${id}:${attempt}`, holder, holder, ttlMs);
  }
}
