import { Counter } from "prom-client";
import type { Metrics } from "../metrics.js";
import { contextFrom, inSpan, markFailed, outgoingTraceparent, SpanKind, spanTraceparent, tracingEnabled } from "../tracing.js";
import { randomBytes } from "node:crypto";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { ServiceError } from "../errors.js";
import { AddressRefused, OutboundGuard, type ResolveHost } from "../outbound/outbound-guard.js";
import type { SecretBox } from "../../storage/secret-box.js";
import type { EventRecord } from "../../storage/events/event-log.js";
import type { DeliveryAttempt, FanOutJob, WebhookDelivery, WebhookSubscription, WebhooksRepo } from "../../storage/repos/webhooks.js";
import { newId, sha256Hex } from "../../storage/ids.js";
import { matchesFilter } from "./filter.js";
import { FairQueue } from "./fair-queue.js";
import type { SendJob } from "./send.js";
import { type DeliverySender, LoopSender, ThreadSender } from "./sender.js";

/** Waits after failed attempts 1…7 (Svix's schedule); an 8th failure marks the delivery failed. */
export const RETRY_SCHEDULE_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000] as const;
/** Each wait is scaled by a random factor in [1 - JITTER, 1 + JITTER], so retries of many deliveries spread out. */
export const JITTER = 0.1;
/** A rotated-out secret still signs (second signature) this long, so receivers can roll over. */
export const ROTATION_GRACE_MS = 24 * 3600_000;
/** Deliveries stored per step of a fan-out; the event loop is yielded between steps. */
export const FAN_OUT_BATCH = 20;
/**
 * Due deliveries (and fan-outs) one tick takes from the queues at most, earliest first; the
 * rest wait for the next tick. Above what the fair queue runs at once (WEBHOOKS_CONCURRENCY),
 * so a tick keeps it full.
 */
const TICK_BATCH = 1000;
/** Subscription secrets kept opened (plaintext) for the next attempts. */
const OPENED_SECRETS = 10_000;
const PRIVATE_HINT = "this deployment does not deliver webhooks to private addresses";

/**
 * The id of the delivery of `eventId` to `subscriptionId`: the same whichever instance stores
 * it, so a fan-out taken over after a crash never stores a delivery twice.
 */
export function deliveryIdOf(eventId: string, subscriptionId: string): string {
  return `msg_${sha256Hex(`${eventId}\n${subscriptionId}`).slice(0, 24)}`;
}

/** A delivery of `event` to `sub`, due now, before any attempt. */
function newDelivery(id: string, event: EventRecord, sub: WebhookSubscription, traceparent: string | undefined): WebhookDelivery {
  const now = new Date().toISOString();
  const delivery: WebhookDelivery = {
    id,
    tenantId: event.tenantId,
    subscriptionId: sub.id,
    eventId: event.id,
    eventType: event.type,
    body: JSON.stringify({ type: event.type, timestamp: event.createdAt, data: event }),
    status: "pending",
    attempts: [],
    nextAttemptAt: now,
    createdAt: now,
    updatedAt: now,
  };
  if (traceparent) delivery.traceparent = traceparent;
  return delivery;
}

/** An attempt's outcome as a bounded label: the receiver's status class, or why there was none. */
function attemptOutcome(attempt: DeliveryAttempt): string {
  if (attempt.statusCode !== null) return `${Math.floor(attempt.statusCode / 100)}xx`;
  return attempt.error?.startsWith("no answer within") ? "timeout" : "error";
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "invalid";
  }
}

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export interface WebhookWorkerDeps {
  config: Pick<
    Config,
    | "WEBHOOKS_ALLOW_PRIVATE"
    | "WEBHOOKS_TIMEOUT_SECONDS"
    | "WEBHOOKS_POLL_MS"
    | "WEBHOOKS_CONCURRENCY"
    | "WEBHOOKS_TENANT_CONCURRENCY"
    | "WEBHOOKS_LEASE_SECONDS"
    | "WEBHOOKS_SEND_THREADS"
  >;
  log: Logger;
  repo: WebhooksRepo;
  secrets: SecretBox;
  resolveHost: ResolveHost;
  /** Called once when a delivery runs out of attempts (publishes `webhook.delivery.failed`). */
  onFailed(delivery: WebhookDelivery): Promise<void>;
  random?: () => number;
  /** Attempts and deliveries by outcome, and the queue's depth (GET /metrics). */
  metrics?: Metrics;
}

/**
 * Sends webhook deliveries (docs/webhooks.md). Publishing an event stores one fan-out job;
 * the job, then each delivery, runs through a fair queue (WEBHOOKS_CONCURRENCY at a time, at
 * most WEBHOOKS_TENANT_CONCURRENCY per tenant, tenants in turn), never in the publishing
 * request. Deliveries are stored before any attempt; each attempt number of a delivery is
 * claimed in storage for WEBHOOKS_LEASE_SECONDS, renewed while it runs, so among live instances
 * exactly one makes it and one that dies gives it up within the lease. A background loop
 * (WEBHOOKS_POLL_MS, unref'd) calls `tick()`; tests call it with the clock they control.
 */
export class WebhookWorker {
  readonly #deps: WebhookWorkerDeps;
  readonly #guard: OutboundGuard;
  readonly #sender: DeliverySender;
  readonly #opened = new Map<string, string>();
  readonly #holder = newId("wrk");
  readonly #random: () => number;
  readonly #inFlight = new Set<Promise<unknown>>();
  readonly #queue: FairQueue;
  /** Deliveries and fan-outs queued or running here, so a tick does not queue them twice. */
  readonly #queued = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(deps: WebhookWorkerDeps) {
    this.#deps = deps;
    this.#random = deps.random ?? Math.random;
    this.#queue = new FairQueue(deps.config.WEBHOOKS_CONCURRENCY, deps.config.WEBHOOKS_TENANT_CONCURRENCY);
    this.#guard = new OutboundGuard({
      allowPrivate: deps.config.WEBHOOKS_ALLOW_PRIVATE,
      resolve: deps.resolveHost,
      hint: PRIVATE_HINT,
    });
    // docs/webhooks.md "Delivery threads": attempts in worker threads unless set to 0.
    const threads = deps.config.WEBHOOKS_SEND_THREADS;
    this.#sender =
      threads > 0
        ? new ThreadSender(threads, { allowPrivate: deps.config.WEBHOOKS_ALLOW_PRIVATE, hint: PRIVATE_HINT }, deps.resolveHost, {
            ended: (reason) => deps.log.error({ msg: "webhook delivery thread ended; the next attempt starts another", reason }),
          })
        : new LoopSender(this.#guard);
    const { metrics } = deps;
    if (metrics) {
      this.#counters = {
        attempts: new Counter({
          name: "gateway_webhook_attempts_total",
          help: "Webhook delivery attempts, by outcome (the receiver's status class 2xx…5xx, timeout or error)",
          labelNames: ["outcome"] as const,
          registers: [metrics.registry],
        }),
        deliveries: new Counter({
          name: "gateway_webhook_deliveries_total",
          help: "Webhook deliveries that ended, by outcome (succeeded, or failed once out of attempts)",
          labelNames: ["outcome"] as const,
          registers: [metrics.registry],
        }),
      };
      metrics.gauge(
        "gateway_webhook_queue_depth",
        "Webhook fan-outs and attempts waiting for their turn on this instance",
        () => this.#queue.waiting,
      );
      metrics.gauge(
        "gateway_webhook_attempts_running",
        "Webhook fan-outs and attempts running on this instance",
        () => this.#queue.running,
      );
    }
  }

  #counters: { attempts: Counter<"outcome">; deliveries: Counter<"outcome"> } | undefined;

  start() {
    const every = this.#deps.config.WEBHOOKS_POLL_MS;
    if (every <= 0 || this.#closed) return;
    const loop = () => {
      this.#timer = setTimeout(() => {
        void this.#track(this.tick())
          .catch((error) => this.#deps.log.error({ msg: "webhook worker tick failed", error: String(error) }))
          .finally(() => {
            if (!this.#closed) loop();
          });
      }, every);
      this.#timer.unref();
    };
    loop();
  }

  async close() {
    this.#closed = true;
    clearTimeout(this.#timer);
    // Attempts in flight are cut, so shutdown never waits for a slow receiver.
    this.#sender.abort();
    await Promise.allSettled([...this.#inFlight]);
    await this.#sender.close();
    this.#guard.close();
  }

  /** The address rule at subscription time: http(s), and every address the name has is allowed (400 otherwise). */
  async checkUrl(raw: string): Promise<URL> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ServiceError("VALIDATION_FAILED", "url must be an absolute http(s) URL");
    }
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw new ServiceError("VALIDATION_FAILED", `url must be http or https, not ${url.protocol}`);
    if (url.username || url.password) throw new ServiceError("VALIDATION_FAILED", "url must not carry credentials");
    try {
      await this.#guard.resolve(url.hostname);
    } catch (error) {
      if (error instanceof AddressRefused) throw new ServiceError("VALIDATION_FAILED", error.message);
      throw new ServiceError("VALIDATION_FAILED", `url host ${url.hostname} does not resolve`);
    }
    return url;
  }

  /** Deliveries waiting in this instance's queue, and running (docs/webhooks.md "Fair delivery"). */
  get queue(): { waiting: number; running: number } {
    return { waiting: this.#queue.waiting, running: this.#queue.running };
  }

  /**
   * Called when an event is published: stores its fan-out job (one write, whatever the number
   * of subscriptions) and queues it; answers before any subscription is read.
   */
  async published(event: EventRecord): Promise<void> {
    const job: FanOutJob = { eventId: event.id, tenantId: event.tenantId, event, createdAt: new Date().toISOString() };
    const traceparent = outgoingTraceparent();
    if (traceparent) job.traceparent = traceparent;
    // Due for another instance once this one had a lease's time to run it (it died otherwise).
    await this.#deps.repo.putFanOut(job, Date.now() + this.#deps.config.WEBHOOKS_LEASE_SECONDS * 1000);
    this.#queueFanOut(job);
  }

  #queueFanOut(job: FanOutJob): void {
    const key = `fanout:${job.eventId}`;
    if (this.#closed || this.#queued.has(key)) return;
    this.#queued.add(key);
    void this.#track(this.#queue.push(job.tenantId, () => this.#runFanOut(job)))
      .catch((error) => this.#deps.log.error({ msg: "webhook fan-out failed", eventId: job.eventId, error: String(error) }))
      .finally(() => this.#queued.delete(key));
  }

  /**
   * Stores the event's deliveries a page of subscriptions at a time, each page with the job's
   * progress in one atomic step (the last one removes the job), queueing each delivery for its
   * first attempt. A job taken over after a crash starts from the page after its cursor.
   */
  async #runFanOut(job: FanOutJob): Promise<void> {
    const lease = this.#deps.config.WEBHOOKS_LEASE_SECONDS * 1000;
    if (this.#closed || !(await this.#deps.repo.claimFanOut(job.eventId, this.#holder, lease))) return;
    const renewal = setInterval(() => void this.#deps.repo.renewFanOut(job.eventId, this.#holder, lease).catch(() => undefined), lease / 3);
    renewal.unref();
    try {
      const { event } = job;
      for (;;) {
        if (this.#closed) return;
        const page = await this.#deps.repo.subscriptionPage(job.tenantId, job.after, FAN_OUT_BATCH);
        const subs = page.subs.filter((sub) => sub.enabled && matchesFilter(sub.filter, event));
        // A delivery already stored (a step another instance made before its claim expired) is left as it is.
        const ids = subs.map((sub) => deliveryIdOf(event.id, sub.id));
        const stored = ids.length ? await this.#deps.repo.storedDeliveryIds(job.tenantId, ids) : new Set<string>();
        const fresh = subs
          .filter((_, i) => !stored.has(ids[i]!))
          .map((sub) => newDelivery(deliveryIdOf(event.id, sub.id), event, sub, job.traceparent));
        await this.#deps.repo.storeFanOutStep(job, fresh, page.more ? page.last! : null);
        for (const delivery of fresh) void this.#queueAttempt(delivery.tenantId, delivery.id);
        if (!page.more) return;
        await yieldToLoop();
      }
    } finally {
      clearInterval(renewal);
    }
  }

  /** Queues one attempt of a delivery (fairly, by tenant); resolves with its outcome. */
  #queueAttempt(tenantId: string, id: string, now?: number): Promise<WebhookDelivery | null> {
    const key = `delivery:${id}`;
    if (this.#closed || this.#queued.has(key)) return Promise.resolve(null);
    this.#queued.add(key);
    // Closed while it waited its turn: the attempt stays due for the next start (or another
    // instance), rather than being made and cut by the shutdown.
    const done = this.#queue.push(tenantId, async () => (this.#closed ? null : this.attempt(id, now === undefined ? {} : { now })));
    void this.#track(done)
      .catch(() => undefined)
      .finally(() => this.#queued.delete(key));
    return done.catch(() => null);
  }

  /**
   * Stores one delivery of a stored event per given subscription (POST /webhooks/dispatch) and
   * queues their attempts; answers with the deliveries as stored.
   */
  async fanOut(event: EventRecord, only: WebhookSubscription[]): Promise<WebhookDelivery[]> {
    const deliveries: WebhookDelivery[] = [];
    const traceparent = outgoingTraceparent();
    for (const sub of only) deliveries.push(await this.#deps.repo.putDelivery(newDelivery(newId("msg"), event, sub, traceparent)));
    for (const delivery of deliveries) void this.#queueAttempt(delivery.tenantId, delivery.id);
    return deliveries;
  }

  /**
   * Takes up fan-outs left by an instance that died (their claim expired), and attempts every
   * due delivery once through the fair queue (those another instance claimed are skipped).
   * Resolves with the number of attempts made.
   */
  async tick(now = Date.now()): Promise<number> {
    // Both queues are read by score (docs/webhooks.md "Storage"): what is due, nothing else.
    for (const job of await this.#deps.repo.fanOutsDue(now, TICK_BATCH)) this.#queueFanOut(job);
    // The due queue names each delivery's tenant: the attempt reads the delivery itself.
    const due = await this.#deps.repo.due(now, TICK_BATCH);
    const results = await Promise.all(due.map(({ id, tenantId }) => this.#queueAttempt(tenantId, id, now)));
    return results.filter(Boolean).length;
  }

  /**
   * One attempt, if due (or `manual`) and this instance wins its claim; null otherwise. A
   * manual attempt (POST /webhooks/deliveries/{id}/retry) does not change the schedule.
   */
  async attempt(id: string, options: { now?: number; manual?: boolean } = {}): Promise<WebhookDelivery | null> {
    const now = options.now ?? Date.now();
    const delivery = await this.#deps.repo.getDelivery(id);
    if (!delivery) return null;
    if (!options.manual && (delivery.status !== "pending" || !delivery.nextAttemptAt || Date.parse(delivery.nextAttemptAt) > now))
      return null;
    // The claim is a lease renewed while the attempt runs: an instance that dies mid-attempt
    // gives it up within WEBHOOKS_LEASE_SECONDS, and another instance's tick makes it.
    const lease = this.#deps.config.WEBHOOKS_LEASE_SECONDS * 1000;
    const number = delivery.attempts.length;
    if (!(await this.#deps.repo.claimAttempt(delivery.id, number, this.#holder, lease))) return null;
    const renewal = setInterval(
      () => void this.#deps.repo.renewAttempt(delivery.id, number, this.#holder, lease).catch(() => undefined),
      lease / 3,
    );
    renewal.unref();
    let sub: WebhookSubscription | null;
    let attempt: DeliveryAttempt;
    try {
      sub = await this.#deps.repo.getSubscription(delivery.subscriptionId);
      attempt = sub
        ? await this.#tracedSend(sub, delivery, number)
        : { at: new Date().toISOString(), statusCode: null, durationMs: 0, error: "subscription deleted" };
    } finally {
      clearInterval(renewal);
    }
    const ok = attempt.statusCode !== null && attempt.statusCode >= 200 && attempt.statusCode < 300;
    const attempts = [...delivery.attempts, attempt];
    let next: WebhookDelivery;
    if (ok) next = { ...delivery, attempts, status: "succeeded", nextAttemptAt: null };
    else if (options.manual) next = { ...delivery, attempts };
    else {
      const wait = sub ? RETRY_SCHEDULE_MS[attempts.length - 1] : undefined;
      next =
        wait === undefined
          ? { ...delivery, attempts, status: "failed", nextAttemptAt: null }
          : {
              ...delivery,
              attempts,
              nextAttemptAt: new Date(now + Math.round(wait * (1 - JITTER + 2 * JITTER * this.#random()))).toISOString(),
            };
    }
    next.updatedAt = new Date().toISOString();
    await this.#deps.repo.updateDelivery(next);
    if (this.#counters) {
      this.#counters.attempts.inc({ outcome: attemptOutcome(attempt) });
      if (next.status !== "pending" && delivery.status === "pending") this.#counters.deliveries.inc({ outcome: next.status });
    }
    if (next.status === "failed" && delivery.status !== "failed") await this.#deps.onFailed(next).catch(() => undefined);
    return next;
  }

  /**
   * One attempt, while tracing a client span continuing the trace that published the event
   * (delivery, subscription, event type, attempt number, tenant, the receiver's host and status;
   * never the URL's path or query, the body or a secret), sent on as `traceparent`.
   */
  #tracedSend(sub: WebhookSubscription, delivery: WebhookDelivery, number: number): Promise<DeliveryAttempt> {
    if (!tracingEnabled()) return this.#sender.send(this.#job(sub, delivery));
    const attributes = {
      "gateway.webhook.delivery_id": delivery.id,
      "gateway.webhook.subscription_id": delivery.subscriptionId,
      "gateway.webhook.attempt": number + 1,
      "gateway.event.type": delivery.eventType,
      "gateway.tenant_id": delivery.tenantId,
      "server.address": hostOf(sub.url),
    };
    const parent = delivery.traceparent ? contextFrom(delivery.traceparent) : undefined;
    return inSpan(
      `webhook ${delivery.eventType}`,
      SpanKind.CLIENT,
      attributes,
      async (span) => {
        const job = this.#job(sub, delivery);
        if (span) job.traceparent = spanTraceparent(span);
        const attempt = await this.#sender.send(job);
        if (span) {
          if (attempt.statusCode !== null) span.setAttribute("http.response.status_code", attempt.statusCode);
          const outcome = attemptOutcome(attempt);
          if (outcome !== "2xx") markFailed(span, outcome);
        }
        return attempt;
      },
      parent,
    );
  }

  /** One attempt's request for the sender: the subscription's URL and secrets in plaintext (opened once per sealed value). */
  #job(sub: WebhookSubscription, delivery: WebhookDelivery): SendJob {
    const secrets = [this.#open(sub.secret)];
    if (sub.previousSecret && sub.previousUntil && Date.parse(sub.previousUntil) > Date.now()) secrets.push(this.#open(sub.previousSecret));
    return { id: delivery.id, url: sub.url, body: delivery.body, secrets, timeoutMs: this.#deps.config.WEBHOOKS_TIMEOUT_SECONDS * 1000 };
  }

  /** A subscription's secret in plaintext, kept for the next attempts (a rotation seals a new value, so it is a new entry). */
  #open(sealed: string): string {
    let plain = this.#opened.get(sealed);
    if (plain === undefined) {
      plain = this.#deps.secrets.open(sealed);
      if (this.#opened.size >= OPENED_SECRETS) this.#opened.delete(this.#opened.keys().next().value!);
      this.#opened.set(sealed, plain);
    }
    return plain;
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    this.#inFlight.add(promise);
    void promise.finally(() => this.#inFlight.delete(promise)).catch(() => undefined);
    return promise;
  }

  /** A fresh signing secret, `whsec_` + 24 random bytes in base64 (Standard Webhooks). */
  static newSecret(): string {
    return `whsec_${randomBytes(24).toString("base64")}`;
  }
}
