import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
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

/** A published event waiting to be turned into deliveries (docs/webhooks.md "Fair delivery"). */
export interface FanOutJob {
  /** The event's id. */
  id: string;
  tenantId: string;
  event: EventRecord;
  createdAt: string;
}

interface Owner {
  tenantId: string;
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
    this.#fanOuts = new Collection(store.kv, "webhook-fanout");
  }

  /** Stores a fan-out job: the one write publishing an event costs, whatever the number of subscriptions. */
  putFanOut(job: FanOutJob) {
    return this.#fanOuts.put([job.id], job);
  }

  /** Every stored fan-out job, oldest first. */
  async fanOuts(): Promise<FanOutJob[]> {
    return (await this.#fanOuts.list()).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async removeFanOut(job: FanOutJob) {
    await this.#fanOuts.remove(job.id);
    await this.#atomic.delete(`webhook-fanout-claim:${job.id}`);
  }

  /** One instance works a fan-out job at a time: a lease, renewed per batch. */
  claimFanOut(id: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.setIfAbsent(`webhook-fanout-claim:${id}`, holder, ttlMs);
  }

  renewFanOut(id: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.compareAndSet(`webhook-fanout-claim:${id}`, holder, holder, ttlMs);
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

  async removeSubscription(sub: WebhookSubscription) {
    await this.#subs.remove(sub.tenantId, sub.id);
    await this.#subOwners.remove(sub.id);
  }

  async putDelivery(delivery: WebhookDelivery) {
    await this.#deliveryOwners.put([delivery.id], { tenantId: delivery.tenantId });
    await this.#deliveries.put([delivery.tenantId, delivery.id], delivery);
    if (delivery.status === "pending" && delivery.nextAttemptAt) await this.#due.put([delivery.id], { id: delivery.id, tenantId: delivery.tenantId, dueAt: Date.parse(delivery.nextAttemptAt) });
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

  /** Pending deliveries due at or before `now` with their tenant, earliest first. */
  async dueEntries(now: number): Promise<{ id: string; tenantId: string }[]> {
    const all = await this.#due.list();
    return all.filter((entry) => entry.dueAt <= now).sort((a, b) => a.dueAt - b.dueAt);
  }

  /** Ids of pending deliveries due at or before `now`, on every instance's view. */
  async due(now: number): Promise<string[]> {
    const all = await this.#due.list();
    return all.filter((entry) => entry.dueAt <= now).sort((a, b) => a.dueAt - b.dueAt).map((entry) => entry.id);
  }

  /**
   * Claims attempt number `attempt` of a delivery for `holder` for `ttlMs`: exactly one
   * instance wins; a holder that dies releases it when the claim expires (a lease the live
   * holder renews, `renewAttempt`).
   */
  claimAttempt(id: string, attempt: number, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.setIfAbsent(`webhook-attempt:${id}:${attempt}`, holder, ttlMs);
  }

  /** Pushes the end of `holder`'s claim to `ttlMs` from now; false when the claim is no longer its own. */
  renewAttempt(id: string, attempt: number, holder: string, ttlMs: number): Promise<boolean> {
    return this.#atomic.compareAndSet(`webhook-attempt:${id}:${attempt}`, holder, holder, ttlMs);
  }

  /** Subscriptions of a tenant, counted (the quota check, docs/quotas.md). */
  async countSubscriptions(tenantId: string): Promise<number> {
    return (await this.#subs.list(tenantId)).length;
  }

  /**
   * Runs `fn` as the only creator of the tenant's subscriptions on every instance (a claim
   * with a 10 s lease, so a process killed holding it blocks the others for at most that):
   * the quota's count and the create cannot interleave with another create.
   */
  async withTenantLock<T>(tenantId: string, fn: () => Promise<T>): Promise<T> {
    const key = `webhook-subs-lock:${tenantId}`;
    const token = randomBytes(9).toString("base64url");
    const deadline = Date.now() + 20_000;
    while (!(await this.#atomic.setIfAbsent(key, token, 10_000))) {
      if (Date.now() > deadline) throw new Error(`The webhook subscriptions of tenant ${tenantId} stayed locked`);
      await sleep(3 + Math.random() * 12);
    }
    try {
      return await fn();
    } finally {
      await this.#atomic.compareAndSet(key, token, null).catch(() => undefined);
    }
  }
}
