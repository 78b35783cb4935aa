import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { ServiceError } from "../errors.js";
import { AddressRefused, OutboundGuard, type ResolveHost } from "../outbound/outbound-guard.js";
import { toGuardedFetch, type GuardedFetch } from "../outbound/guarded-fetch.js";
import type { SecretBox } from "../../storage/secret-box.js";
import type { EventRecord } from "../../storage/events/event-log.js";
import type { DeliveryAttempt, WebhookDelivery, WebhookSubscription, WebhooksRepo } from "../../storage/repos/webhooks.js";
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
  config: Pick<Config, "WEBHOOKS_ALLOW_PRIVATE" | "WEBHOOKS_TIMEOUT_SECONDS" | "WEBHOOKS_POLL_MS">;
  log: Logger;
  repo: WebhooksRepo;
  secrets: SecretBox;
  resolveHost: ResolveHost;
  /** Called once when a delivery runs out of attempts (publishes `webhook.delivery.failed`). */
  onFailed(delivery: WebhookDelivery): Promise<void>;
  random?: () => number;
}

/**
 * Sends webhook deliveries (docs/webhooks.md). Deliveries are stored before any attempt; each
 * attempt number of a delivery is claimed in storage first, so among all instances exactly
 * one makes it. A background loop (WEBHOOKS_POLL_MS, unref'd) calls `tick()`; tests call it
 * with the clock they control.
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
    this.#closing.abort();
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

  /** Stores one delivery per enabled subscription of the event's tenant whose filter matches, then attempts them. */
  async fanOut(event: EventRecord, only?: WebhookSubscription[]): Promise<WebhookDelivery[]> {
    const subs = only ?? (await this.#deps.repo.listSubscriptions(event.tenantId)).filter((sub) => sub.enabled && matchesFilter(sub.filter, event));
    const now = new Date().toISOString();
    const deliveries: WebhookDelivery[] = [];
    for (const sub of subs) {
      const body = JSON.stringify({ type: event.type, timestamp: event.createdAt, data: event });
      deliveries.push(
        await this.#deps.repo.putDelivery({
          id: newId("msg"),
          tenantId: event.tenantId,
          subscriptionId: sub.id,
          eventId: event.id,
          eventType: event.type,
          body,
          status: "pending",
          attempts: [],
          nextAttemptAt: now,
          createdAt: now,
          updatedAt: now,
        }),
      );
    }
    for (const delivery of deliveries) void this.#track(this.attempt(delivery.id)).catch(() => undefined);
    return deliveries;
  }

  /** Attempts every due delivery once (those another instance claimed are skipped). */
  async tick(now = Date.now()): Promise<number> {
    const ids = await this.#deps.repo.due(now);
    let attempted = 0;
    // A few at a time: a slow receiver must not hold up the others, nor open unbounded sockets.
    for (let i = 0; i < ids.length; i += 8) {
      const results = await Promise.all(ids.slice(i, i + 8).map((id) => this.attempt(id, { now }).catch(() => null)));
      attempted += results.filter(Boolean).length;
    }
    return attempted;
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
    const ttl = this.#deps.config.WEBHOOKS_TIMEOUT_SECONDS * 1000 + 60_000;
    if (!(await this.#deps.repo.claimAttempt(delivery.id, delivery.attempts.length, this.#holder, ttl))) return null;
    const sub = await this.#deps.repo.getSubscription(delivery.subscriptionId);
    const attempt = sub ? await this.#send(sub, delivery) : { at: new Date().toISOString(), statusCode: null, durationMs: 0, error: "subscription deleted" };
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
