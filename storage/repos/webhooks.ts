import { Collection } from "../collection.js";
import type { Store } from "../store.js";
import type { EventRecord } from "../events/event-log.js";

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
}

interface Owner {
  tenantId: string;
}

/**
 * An event still to be fanned out to its tenant's subscriptions: stored when the event is
 * published (one write, whatever the number of subscriptions), removed once every delivery is
 * stored. A job whose instance died is taken over when its claim expires.
 */
export interface FanOutJob {
  eventId: string;
  tenantId: string;
  /** The event as published (what each delivery's body carries). */
  event: EventRecord;
  createdAt: string;
}

interface Due {
  id: string;
  tenantId: string;
  dueAt: number;
}

/**
 * Webhook subscriptions and deliveries, under their tenant, with an owner index by id (for
 * routes that take only an id) and a due index of pending deliveries that every instance scans.
 */
export class WebhooksRepo {
  readonly #subs: Collection<WebhookSubscription>;
  readonly #subOwners: Collection<Owner>;
  readonly #deliveries: Collection<WebhookDelivery>;
  readonly #deliveryOwners: Collection<Owner>;
  readonly #due: Collection<Due>;
  readonly #fanOuts: Collection<FanOutJob>;
  readonly #atomic: Store["atomic"];

  constructor(store: Store) {
    this.#atomic = store.atomic;
    this.#subs = new Collection(store.kv, "webhook-subs");
    this.#subOwners = new Collection(store.kv, "webhook-sub-owners");
    this.#deliveries = new Collection(store.kv, "webhook-deliveries");
    this.#deliveryOwners = new Collection(store.kv, "webhook-delivery-owners");
    this.#due = new Collection(store.kv, "webhook-due");
    this.#fanOuts = new Collection(store.kv, "webhook-fanouts");
  }

  putFanOut(job: FanOutJob) {
    return this.#fanOuts.put([job.eventId], job);
  }

  removeFanOut(eventId: string) {
    return this.#fanOuts.remove(eventId);
  }

  listFanOuts(): Promise<FanOutJob[]> {
    return this.#fanOuts.list();
  }

  /** Claims the fan-out of one event for `holder` for `ttlMs` (renewed while it runs). */
  claimFanOut(eventId: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.setIfAbsent(`webhook-fanout:${eventId}`, holder, ttlMs);
  }

  renewFanOut(eventId: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.compareAndSet(`webhook-fanout:${eventId}`, holder, holder, ttlMs);
  }

  async putSubscription(sub: WebhookSubscription) {
    await this.#subOwners.put([sub.id], { tenantId: sub.tenantId });
    return this.#subs.put([sub.tenantId, sub.id], sub);
  }

  async getSubscription(id: string): Promise<WebhookSubscription | null> {
    if (!Collection.validId(id)) return null;
    const owner = await this.#subOwners.get(id);
    return owner ? this.#subs.get(owner.tenantId, id) : null;
  }

  listSubscriptions(tenantId: string) {
    return this.#subs.list(tenantId);
  }

  /** How many subscriptions a tenant has (their keys, no record read). */
  async countSubscriptions(tenantId: string): Promise<number> {
    return (await this.#subs.keys(tenantId)).length;
  }

  /** A tenant's subscriptions, `size` at a time (a fan-out reads thousands without one long read). */
  async *subscriptionPages(tenantId: string, size: number): AsyncGenerator<WebhookSubscription[]> {
    const keys = await this.#subs.keys(tenantId);
    for (let i = 0; i < keys.length; i += size) yield await this.#subs.getMany(keys.slice(i, i + size));
  }

  async removeSubscription(sub: WebhookSubscription) {
    await this.#subs.remove(sub.tenantId, sub.id);
    await this.#subOwners.remove(sub.id);
  }

  async putDelivery(delivery: WebhookDelivery) {
    await this.#deliveryOwners.put([delivery.id], { tenantId: delivery.tenantId });
    return this.updateDelivery(delivery);
  }

  /** Writes a delivery already stored (its owner index is unchanged): an attempt's outcome. */
  async updateDelivery(delivery: WebhookDelivery) {
    await this.#deliveries.put([delivery.tenantId, delivery.id], delivery);
    if (delivery.status === "pending" && delivery.nextAttemptAt)
      await this.#due.put([delivery.id], { id: delivery.id, tenantId: delivery.tenantId, dueAt: Date.parse(delivery.nextAttemptAt) });
    else await this.#due.remove(delivery.id);
    return delivery;
  }

  async getDelivery(id: string): Promise<WebhookDelivery | null> {
    if (!Collection.validId(id)) return null;
    const owner = await this.#deliveryOwners.get(id);
    return owner ? this.#deliveries.get(owner.tenantId, id) : null;
  }

  listDeliveries(tenantId: string) {
    return this.#deliveries.list(tenantId);
  }

  /** Pending deliveries due at or before `now` (id and tenant), on every instance's view. */
  async due(now: number): Promise<{ id: string; tenantId: string }[]> {
    const all = await this.#due.list();
    return all
      .filter((entry) => entry.dueAt <= now)
      .sort((a, b) => a.dueAt - b.dueAt)
      .map(({ id, tenantId }) => ({ id, tenantId }));
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
