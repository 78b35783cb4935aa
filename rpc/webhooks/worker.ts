import { createHash, randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { ServiceError } from "../errors.js";
import { AddressRefused, OutboundGuard, type ResolveHost } from "../outbound/outbound-guard.js";
import { toGuardedFetch, type GuardedFetch } from "../outbound/guarded-fetch.js";
import type { SecretBox } from "../../storage/secret-box.js";
import type { EventRecord } from "../../storage/events/event-log.js";
import type { DeliveryAttempt, FanOutJob, WebhookDelivery, WebhookSubscription, WebhooksRepo } from "../../storage/repos/webhooks.js";
import { newId } from "../../storage/ids.js";
import { matchesFilter } from "./filter.js";

/** Waits after failed attempts 1…7 (Svix's schedule); an 8th failure marks the delivery failed. */
export const RETRY_SCHEDULE_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000] as const;
/** Each wait is scaled by a random factor in [1 - JITTER, 1 + JITTER], so retries of many deliveries spread out. */
export const JITTER = 0.1;
/** Bytes of a receiver's answer kept on the attempt. */
export const SNIPPET_BYTES = 1024;
/** A rotated-out secret still signs (second signature) this long, so receivers can roll over. */
export const ROTATION_GRACE_MS = 24 * 3600_000;

export interface WebhookWorkerDeps {
  config: Pick<Config, "WEBHOOKS_ALLOW_PRIVATE" | "WEBHOOKS_TIMEOUT_SECONDS" | "WEBHOOKS_POLL_MS" | "WEBHOOKS_CONCURRENCY" | "WEBHOOKS_TENANT_CONCURRENCY" | "WEBHOOKS_CLAIM_LEASE_MS">;
  log: Logger;
  repo: WebhooksRepo;
  secrets: SecretBox;
  resolveHost: ResolveHost;
  /** Called once when a delivery runs out of attempts (publishes `webhook.delivery.failed`). */
  onFailed(delivery: WebhookDelivery): Promise<void>;
  random?: () => number;
}

/** Subscriptions turned into deliveries per step of a fan-out, between which other work runs. */
const FAN_OUT_BATCH = 25;

/** One delivery waiting for a slot: its id and the clock of the tick that found it. */
interface Queued {
  id: string;
  now: number;
}

/** The delivery of an event to a subscription has one id, so a fan-out resumed after a crash never doubles it. */
export function deliveryIdFor(eventId: string, subscriptionId: string): string {
  return `msg_${createHash("sha256").update(`${eventId}|${subscriptionId}`).digest("base64url").slice(0, 26)}`;
}

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Sends webhook deliveries (docs/webhooks.md "Fair delivery"). Publishing an event only stores
 * a fan-out job (constant time, whatever the number of subscriptions); the fan-out and every
 * attempt run here, never in the publishing request:
 * - fan-out jobs are worked a batch of subscriptions at a time, one batch per tenant in turn,
 *   each delivery stored (under an id derived from event and subscription) before it is
 *   queued;
 * - attempts run in a bounded pool (WEBHOOKS_CONCURRENCY per instance, at most
 *   WEBHOOKS_TENANT_CONCURRENCY of one tenant), tenants taken in turn, so one tenant's backlog
 *   delays only that tenant;
 * - each attempt number of a delivery is claimed in storage first, so among all instances
 *   exactly one makes it; the claim is a lease (WEBHOOKS_CLAIM_LEASE_MS) renewed while the
 *   attempt runs, so a dead instance's claims are retried within seconds.
 * A background loop (WEBHOOKS_POLL_MS, unref'd) queues the due deliveries; `tick()` does it
 * and waits for the attempts (tests call it with the clock they control).
 */
export class WebhookWorker {
  readonly #deps: WebhookWorkerDeps;
  readonly #guard: OutboundGuard;
  readonly #fetch: GuardedFetch;
  readonly #holder = newId("wrk");
  readonly #random: () => number;
  readonly #inFlight = new Set<Promise<unknown>>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Per tenant, deliveries waiting for a slot; tenants with a queue in `#turns`, served in turn. */
  readonly #queues = new Map<string, Queued[]>();
  readonly #turns: string[] = [];
  /** Delivery ids queued or in flight here, so a scan never queues one twice. */
  readonly #known = new Set<string>();
  /** Attempts in flight per tenant, and in all. */
  readonly #running = new Map<string, number>();
  #active = 0;
  /** Attempts made (not skipped) so far, for tick()'s count. */
  #attempted = 0;
  readonly #idle = new Set<() => void>();
  #fanningOut: Promise<void> | undefined;
  #fanOutAgain = false;
  /** Aborts attempts in flight when the service closes, so shutdown never waits for a slow receiver. */
  readonly #closing = new AbortController();

  constructor(deps: WebhookWorkerDeps) {
    this.#deps = deps;
    this.#random = deps.random ?? Math.random;
    this.#guard = new OutboundGuard({
      allowPrivate: deps.config.WEBHOOKS_ALLOW_PRIVATE,
      resolve: deps.resolveHost,
      hint: "set WEBHOOKS_ALLOW_PRIVATE=true to allow webhooks inside the deployment",
    });
    this.#fetch = toGuardedFetch(this.#guard);
  }

  start() {
    const every = this.#deps.config.WEBHOOKS_POLL_MS;
    if (every <= 0 || this.#closed) return;
    // Fan-out jobs left by a previous run (or a dead instance) are taken up at once.
    this.#wakeFanOut();
    const loop = () => {
      this.#timer = setTimeout(() => {
        void this.#track(this.#scan(Date.now()))
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
    this.#closing.abort();
    this.#pump();
    await Promise.allSettled([...this.#inFlight]);
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
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new ServiceError("VALIDATION_FAILED", `url must be http or https, not ${url.protocol}`);
    if (url.username || url.password) throw new ServiceError("VALIDATION_FAILED", "url must not carry credentials");
    try {
      await this.#guard.resolve(url.hostname);
    } catch (error) {
      if (error instanceof AddressRefused) throw new ServiceError("VALIDATION_FAILED", error.message);
      throw new ServiceError("VALIDATION_FAILED", `url host ${url.hostname} does not resolve`);
    }
    return url;
  }

  /**
   * Hands a published event to its tenant's subscriptions: stores a fan-out job (one write,
   * whatever the number of subscriptions) and wakes the worker. The deliveries are made and
   * attempted in the background (docs/webhooks.md "Fair delivery").
   */
  async fanOut(event: EventRecord): Promise<void> {
    await this.#deps.repo.putFanOut({ id: event.id, tenantId: event.tenantId, event, createdAt: new Date().toISOString() });
    this.#wakeFanOut();
  }

  /**
   * `POST /webhooks/dispatch`: stores one delivery per given subscription now (the answer
   * lists them) and queues their attempts in the pool.
   */
  async dispatch(event: EventRecord, subs: WebhookSubscription[]): Promise<WebhookDelivery[]> {
    const deliveries: WebhookDelivery[] = [];
    for (const sub of subs) deliveries.push(await this.#store(event, sub, newId("msg")));
    const now = Date.now();
    for (const delivery of deliveries) this.#queue(delivery.tenantId, { id: delivery.id, now });
    return deliveries;
  }

  async #store(event: EventRecord, sub: WebhookSubscription, id: string): Promise<WebhookDelivery> {
    const now = new Date().toISOString();
    return this.#deps.repo.putDelivery({
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
    });
  }

  #wakeFanOut() {
    if (this.#closed) return;
    if (this.#fanningOut) {
      this.#fanOutAgain = true;
      return;
    }
    this.#fanningOut = this.#track(this.#runFanOuts())
      .catch((error) => this.#deps.log.error({ msg: "webhook fan-out failed", error: String(error) }))
      .finally(() => {
        this.#fanningOut = undefined;
        if (this.#fanOutAgain) {
          this.#fanOutAgain = false;
          this.#wakeFanOut();
        }
      });
  }

  /**
   * Works every stored fan-out job: a batch of subscriptions of each tenant's job in turn,
   * yielding to the event loop between batches. A job is claimed (a lease, renewed per batch)
   * so one instance works it; a job of a dead instance is taken over when its lease ends and
   * redone from the start, its deliveries' ids making the redo harmless.
   */
  async #runFanOuts(): Promise<void> {
    const lease = this.#deps.config.WEBHOOKS_CLAIM_LEASE_MS;
    const jobs = await this.#deps.repo.fanOuts();
    interface Running {
      job: FanOutJob;
      subs: WebhookSubscription[];
      next: number;
    }
    const running: Running[] = [];
    for (const job of jobs) {
      if (this.#closed) return;
      if (!(await this.#deps.repo.claimFanOut(job.id, this.#holder, lease))) continue;
      const subs = (await this.#deps.repo.listSubscriptions(job.tenantId)).filter((sub) => sub.enabled && matchesFilter(sub.filter, job.event));
      running.push({ job, subs, next: 0 });
    }
    // One batch of each tenant's job in turn.
    while (running.length > 0 && !this.#closed) {
      for (const item of [...running]) {
        const batch = item.subs.slice(item.next, item.next + FAN_OUT_BATCH);
        item.next += batch.length;
        for (const sub of batch) {
          const id = deliveryIdFor(item.job.event.id, sub.id);
          const delivery = (await this.#deps.repo.getDelivery(id)) ?? (await this.#store(item.job.event, sub, id));
          if (delivery.status === "pending") this.#queue(delivery.tenantId, { id, now: Date.now() });
        }
        if (item.next >= item.subs.length) {
          await this.#deps.repo.removeFanOut(item.job);
          running.splice(running.indexOf(item), 1);
        } else {
          await this.#deps.repo.renewFanOut(item.job.id, this.#holder, lease);
        }
        await yieldToLoop();
      }
    }
  }

  /** Works stored fan-out jobs, then attempts every due delivery once (those another instance claimed are skipped); resolves when done, with the number of attempts made. */
  async tick(now = Date.now()): Promise<number> {
    const before = this.#attempted;
    this.#wakeFanOut();
    await this.#fanningOut;
    await this.#scan(now, true);
    await this.#drained();
    return this.#attempted - before;
  }

  /**
   * Queues the due deliveries (the background loop, every WEBHOOKS_POLL_MS, without waiting
   * for them). While this instance already has a backlog queued, the scan of the whole due
   * index is skipped: that work is due already, and the scan's cost grows with the index.
   */
  async #scan(now: number, always = false): Promise<void> {
    this.#wakeFanOut();
    if (!always && this.#known.size > this.#deps.config.WEBHOOKS_CONCURRENCY * 8) return;
    for (const entry of await this.#deps.repo.dueEntries(now)) this.#queue(entry.tenantId, { id: entry.id, now });
  }

  #queue(tenantId: string, item: Queued) {
    if (this.#closed || this.#known.has(item.id)) return;
    this.#known.add(item.id);
    let queue = this.#queues.get(tenantId);
    if (!queue) {
      queue = [];
      this.#queues.set(tenantId, queue);
      this.#turns.push(tenantId);
    }
    queue.push(item);
    this.#pump();
  }

  /** Starts attempts while slots are free: tenants in turn, each up to its own concurrency. */
  #pump() {
    const { WEBHOOKS_CONCURRENCY: total, WEBHOOKS_TENANT_CONCURRENCY: perTenant } = this.#deps.config;
    if (this.#closed) {
      // Queued deliveries stay due in storage; the next start (or another instance) takes them.
      this.#queues.clear();
      this.#turns.length = 0;
      this.#known.clear();
      if (this.#active === 0) for (const wake of [...this.#idle]) wake();
      return;
    }
    let skipped = 0;
    while (this.#active < total && this.#turns.length > 0 && skipped < this.#turns.length) {
      const tenantId = this.#turns.shift()!;
      const queue = this.#queues.get(tenantId)!;
      const running = this.#running.get(tenantId) ?? 0;
      if (running >= perTenant) {
        this.#turns.push(tenantId);
        skipped += 1;
        continue;
      }
      skipped = 0;
      const item = queue.shift()!;
      if (queue.length > 0) this.#turns.push(tenantId);
      else this.#queues.delete(tenantId);
      this.#active += 1;
      this.#running.set(tenantId, running + 1);
      void this.#track(this.attempt(item.id, { now: item.now }))
        .then((result) => {
          if (result) this.#attempted += 1;
        })
        .catch((error) => this.#deps.log.error({ msg: "webhook attempt failed", deliveryId: item.id, error: String(error) }))
        .finally(() => {
          this.#active -= 1;
          const left = (this.#running.get(tenantId) ?? 1) - 1;
          if (left > 0) this.#running.set(tenantId, left);
          else this.#running.delete(tenantId);
          this.#known.delete(item.id);
          this.#pump();
          if (this.#active === 0 && this.#turns.length === 0) for (const wake of [...this.#idle]) wake();
        });
    }
  }

  /** Resolves once nothing is queued or in flight here. */
  #drained(): Promise<void> {
    if (this.#active === 0 && this.#turns.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        this.#idle.delete(wake);
        resolve();
      };
      this.#idle.add(wake);
    });
  }

  /**
   * One attempt, if due (or `manual`) and this instance wins its claim; null otherwise. A
   * manual attempt (POST /webhooks/deliveries/{id}/retry) does not change the schedule.
   */
  async attempt(id: string, options: { now?: number; manual?: boolean } = {}): Promise<WebhookDelivery | null> {
    const now = options.now ?? Date.now();
    const delivery = await this.#deps.repo.getDelivery(id);
    if (!delivery) return null;
    if (!options.manual && (delivery.status !== "pending" || !delivery.nextAttemptAt || Date.parse(delivery.nextAttemptAt) > now)) return null;
    const lease = this.#deps.config.WEBHOOKS_CLAIM_LEASE_MS;
    const number = delivery.attempts.length;
    if (!(await this.#deps.repo.claimAttempt(delivery.id, number, this.#holder, lease))) return null;
    // Read again under the claim: a holder whose lease ran out after it recorded attempt
    // `number` must not have it made twice.
    const current = await this.#deps.repo.getDelivery(id);
    if (!current || current.attempts.length !== number || (!options.manual && current.status !== "pending")) return null;
    // The claim is renewed while the attempt runs; a dead instance stops renewing, and its
    // claim ends WEBHOOKS_CLAIM_LEASE_MS later.
    const renew = setInterval(() => void this.#deps.repo.renewAttempt(delivery.id, number, this.#holder, lease).catch(() => undefined), Math.max(50, lease / 3));
    renew.unref();
    let attempt: DeliveryAttempt;
    let sub: WebhookSubscription | null;
    try {
      sub = await this.#deps.repo.getSubscription(delivery.subscriptionId);
      attempt = sub ? await this.#send(sub, delivery) : { at: new Date().toISOString(), statusCode: null, durationMs: 0, error: "subscription deleted" };
    } finally {
      clearInterval(renew);
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
          : { ...delivery, attempts, nextAttemptAt: new Date(now + Math.round(wait * (1 - JITTER + 2 * JITTER * this.#random()))).toISOString() };
    }
    next.updatedAt = new Date().toISOString();
    await this.#deps.repo.putDelivery(next);
    if (next.status === "failed" && delivery.status !== "failed") await this.#deps.onFailed(next).catch(() => undefined);
    return next;
  }

  async #send(sub: WebhookSubscription, delivery: WebhookDelivery): Promise<DeliveryAttempt> {
    const started = Date.now();
    const at = new Date(started).toISOString();
    const timestamp = new Date(Math.floor(started / 1000) * 1000);
    const secrets = [sub.secret];
    if (sub.previousSecret && sub.previousUntil && Date.parse(sub.previousUntil) > started) secrets.push(sub.previousSecret);
    const signature = secrets.map((sealed) => new Webhook(this.#deps.secrets.open(sealed)).sign(delivery.id, timestamp, delivery.body)).join(" ");
    const timeoutMs = this.#deps.config.WEBHOOKS_TIMEOUT_SECONDS * 1000;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([timeout, this.#closing.signal]);
    try {
      const res = await this.#fetch(sub.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "chat-agent-tool-gateway-webhooks",
          "webhook-id": delivery.id,
          "webhook-timestamp": String(timestamp.getTime() / 1000),
          "webhook-signature": signature,
        },
        body: delivery.body,
        signal,
      });
      const response = await readSnippet(res, signal);
      const redirect = res.status >= 300 && res.status < 400;
      return {
        at,
        statusCode: res.status,
        durationMs: Date.now() - started,
        ...(redirect ? { error: `redirect to ${res.headers.get("location") ?? "?"} not followed` } : {}),
        response,
      };
    } catch (error) {
      const error_ = timeout.aborted
        ? `no answer within ${timeoutMs / 1000} s (WEBHOOKS_TIMEOUT_SECONDS)`
        : this.#closing.signal.aborted
          ? "interrupted by shutdown"
          : describe(error);
      return { at, statusCode: null, durationMs: Date.now() - started, error: error_ };
    }
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

/** The first SNIPPET_BYTES of the answer; the rest is never read (a huge body costs nothing). */
async function readSnippet(res: Response, signal: AbortSignal): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < SNIPPET_BYTES && !signal.aborted) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } finally {
    void reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, SNIPPET_BYTES).toString("utf8");
}

function describe(error: unknown): string {
  if (error instanceof AddressRefused) return error.message;
  const cause = (error as { cause?: { code?: string } })?.cause;
  const code = (error as { code?: string })?.code ?? cause?.code;
  return code ? `connection failed (${code})` : `connection failed: ${(error as Error)?.message ?? String(error)}`;
}
