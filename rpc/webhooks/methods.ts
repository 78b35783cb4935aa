import * as v from "valibot";
import { isServiceError, ServiceError } from "../errors.js";
import { queryInt } from "../validate.js";
import type { Principal } from "../auth.js";
import { newId, nowIso } from "../../storage/ids.js";
import type { WebhookDelivery, WebhookSubscription } from "../../storage/repos/webhooks.js";
import type { EventRecord } from "../../storage/events/event-log.js";
import { TENANT_ACCESS, tenantAccess, tenantOrPersonal } from "../tenants/access.js";
import { createWithinQuota } from "../quotas.js";
import { FILTER_PATTERN, matchesFilter } from "./filter.js";
import { ROTATION_GRACE_MS, WebhookWorker } from "./worker.js";
import { changedFields, recordAudit } from "../audit.js";
import { webhooksDomain, type WebhooksDeps } from "./deps.js";

const AUTH = { kinds: ["session", "gateway_key"] } as const;
const TenantId = v.pipe(v.string("tenantId must be a string"), v.minLength(1), v.maxLength(128));
const Id = v.pipe(v.string(), v.minLength(1), v.maxLength(128));
const Filter = v.pipe(
  v.array(
    v.pipe(
      v.string(),
      v.maxLength(100),
      v.regex(FILTER_PATTERN, "filter: `*`, a topic or type such as agent.created, or a prefix such as agent.*"),
    ),
    "filter must be an array of patterns",
  ),
  v.minLength(1, "filter needs at least one pattern"),
  v.maxLength(50),
);
const Url = v.pipe(v.string("url must be a string"), v.maxLength(2048));

const SubscriptionView = v.object({
  id: v.string(),
  tenantId: v.string(),
  url: v.string(),
  filter: v.array(v.string()),
  description: v.string(),
  enabled: v.boolean(),
  previousUntil: v.optional(v.string()),
  createdAt: v.string(),
  updatedAt: v.string(),
});
const WithSigningSecret = v.object({
  ...SubscriptionView.entries,
  secret: v.pipe(v.string(), v.description("The signing secret whsec_…: shown in this response only")),
});
const DeliveryView = v.object({
  id: v.string(),
  tenantId: v.string(),
  subscriptionId: v.string(),
  eventId: v.string(),
  eventType: v.string(),
  status: v.picklist(["pending", "succeeded", "failed"]),
  attempts: v.array(v.object({ statusCode: v.nullable(v.number()) })),
  attemptCount: v.number(),
  lastStatusCode: v.nullable(v.number()),
  nextAttemptAt: v.nullable(v.string()),
  createdAt: v.string(),
  updatedAt: v.string(),
});

/** A subscription as the API shows it: never its secret (shown once, at creation and rotation). */
function subscriptionView(sub: WebhookSubscription) {
  const { secret: _secret, previousSecret: _previous, ...rest } = sub;
  return rest;
}

function deliveryView(delivery: WebhookDelivery) {
  const last = delivery.attempts.at(-1);
  const { body: _body, traceparent: _trace, ...rest } = delivery;
  return { ...rest, attemptCount: delivery.attempts.length, lastStatusCode: last?.statusCode ?? null };
}

/** A record of a tenant the caller reaches, else the same 404 as a missing one. */
async function reachable<T extends { tenantId: string }>(
  deps: WebhooksDeps,
  principal: Principal,
  record: T | null,
  what: string,
  id: string,
): Promise<T> {
  const notFound = new ServiceError("NOT_FOUND", `${what} not found: ${id}`);
  if (!record) throw notFound;
  try {
    // Managing webhooks is for the tenant's admins (docs/tenants.md); a non-member gets the
    // same 404 as for a missing record, a member without the role a 403.
    await tenantAccess(deps, principal, record.tenantId, "webhooks");
  } catch (error) {
    if (isServiceError(error) && error.code === "FORBIDDEN") throw error;
    throw notFound;
  }
  return record;
}

const subscription = (deps: WebhooksDeps, principal: Principal, id: string) =>
  deps.webhooks.getSubscription(id).then((sub) => reachable(deps, principal, sub, "Webhook subscription", id));

export const webhookMethods = [
  webhooksDomain.method({
    name: "webhooks.subscriptions.list",
    summary: "A tenant's webhook subscriptions (secrets are never listed).",
    input: v.object({ tenantId: v.optional(TenantId) }),
    auth: AUTH,
    output: v.object({ data: v.array(SubscriptionView) }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/webhooks/subscriptions" }],
    async handler(params, ctx) {
      const tenant = await tenantOrPersonal(ctx.deps, ctx.principal, params.tenantId, TENANT_ACCESS.webhooks);
      const subs = await ctx.deps.webhooks.listSubscriptions(tenant.id);
      return { data: subs.sort((a, b) => a.createdAt.localeCompare(b.createdAt)).map(subscriptionView) };
    },
  }),

  webhooksDomain.method({
    name: "webhooks.subscriptions.create",
    summary:
      "Subscribe a URL to a tenant's events matching `filter`. The URL must pass the private-address rule (400). The " +
      "signing secret `whsec_…` is in this answer only.",
    input: v.object({
      tenantId: v.optional(TenantId),
      url: Url,
      filter: v.optional(Filter, ["*"]),
      description: v.optional(v.pipe(v.string(), v.maxLength(500)), ""),
      enabled: v.optional(v.boolean(), true),
    }),
    auth: AUTH,
    output: WithSigningSecret,
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, FORBIDDEN: {}, CONFLICT: {} },
    http: [{ surface: "gateway", method: "POST", path: "/webhooks/subscriptions", status: 201 }],
    async handler(params, ctx) {
      const tenant = await tenantOrPersonal(ctx.deps, ctx.principal, params.tenantId, TENANT_ACCESS.webhooks);
      const url = await ctx.deps.webhookWorker.checkUrl(params.url);
      const secret = WebhookWorker.newSecret();
      const now = nowIso();
      const sub: WebhookSubscription = {
        id: newId("whs"),
        tenantId: tenant.id,
        url: url.toString(),
        filter: params.filter,
        description: params.description,
        enabled: params.enabled,
        secret: ctx.deps.secrets.seal(secret),
        createdAt: now,
        updatedAt: now,
      };
      // QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT (docs/quotas.md): counted and written under the tenant's lock.
      await createWithinQuota(
        ctx.deps,
        "webhook_subscriptions_per_tenant",
        tenant.id,
        () => ctx.deps.webhooks.countSubscriptions(tenant.id),
        () => ctx.deps.webhooks.putSubscription(sub),
        { tenantId: tenant.id },
      );
      await recordAudit(ctx, {
        action: "webhook.created",
        target: sub.id,
        tenantId: tenant.id,
        changes: { url: sub.url, filter: sub.filter, description: sub.description, enabled: sub.enabled },
      });
      return { ...subscriptionView(sub), secret };
    },
  }),

  webhooksDomain.method({
    name: "webhooks.subscriptions.get",
    summary: "One webhook subscription (no secret).",
    input: v.object({ subscription_id: Id }),
    auth: AUTH,
    output: SubscriptionView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/webhooks/subscriptions/:subscription_id" }],
    async handler(params, ctx) {
      return subscriptionView(await subscription(ctx.deps, ctx.principal, params.subscription_id));
    },
  }),

  webhooksDomain.method({
    name: "webhooks.subscriptions.update",
    summary: "Change a subscription's url, filter, description, or enable/disable it (a disabled subscription gets no new deliveries).",
    input: v.object({
      subscription_id: Id,
      url: v.optional(Url),
      filter: v.optional(Filter),
      description: v.optional(v.pipe(v.string(), v.maxLength(500))),
      enabled: v.optional(v.boolean()),
    }),
    auth: AUTH,
    output: SubscriptionView,
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "PATCH", path: "/webhooks/subscriptions/:subscription_id" }],
    async handler(params, ctx) {
      const sub = await subscription(ctx.deps, ctx.principal, params.subscription_id);
      const url = params.url !== undefined ? (await ctx.deps.webhookWorker.checkUrl(params.url)).toString() : sub.url;
      const updated: WebhookSubscription = {
        ...sub,
        url,
        filter: params.filter ?? sub.filter,
        description: params.description ?? sub.description,
        enabled: params.enabled ?? sub.enabled,
        updatedAt: nowIso(),
      };
      await ctx.deps.webhooks.putSubscription(updated);
      await recordAudit(ctx, {
        action: "webhook.updated",
        target: sub.id,
        tenantId: sub.tenantId,
        changes: changedFields(params, ["subscription_id"]),
      });
      return subscriptionView(updated);
    },
  }),

  webhooksDomain.method({
    name: "webhooks.subscriptions.delete",
    summary: "Delete a subscription; its pending deliveries end as failed on their next attempt.",
    input: v.object({ subscription_id: Id }),
    auth: AUTH,
    output: v.object({ id: v.string(), deleted: v.boolean() }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "DELETE", path: "/webhooks/subscriptions/:subscription_id" }],
    async handler(params, ctx) {
      const sub = await subscription(ctx.deps, ctx.principal, params.subscription_id);
      await ctx.deps.webhooks.removeSubscription(sub);
      await recordAudit(ctx, { action: "webhook.deleted", target: sub.id, tenantId: sub.tenantId });
      return { id: sub.id, deleted: true };
    },
  }),

  webhooksDomain.method({
    name: "webhooks.subscriptions.rotate",
    summary: "A new signing secret, shown in this answer only; the old one also signs for 24 hours so receivers can roll over.",
    input: v.object({ subscription_id: Id }),
    auth: AUTH,
    output: WithSigningSecret,
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: "/webhooks/subscriptions/:subscription_id/rotate-secret" }],
    async handler(params, ctx) {
      const sub = await subscription(ctx.deps, ctx.principal, params.subscription_id);
      const secret = WebhookWorker.newSecret();
      const updated: WebhookSubscription = {
        ...sub,
        secret: ctx.deps.secrets.seal(secret),
        previousSecret: sub.secret,
        previousUntil: new Date(Date.now() + ROTATION_GRACE_MS).toISOString(),
        updatedAt: nowIso(),
      };
      await ctx.deps.webhooks.putSubscription(updated);
      // That the secret changed, never the secret.
      await recordAudit(ctx, { action: "webhook.secret_rotated", target: sub.id, tenantId: sub.tenantId });
      return { ...subscriptionView(updated), secret };
    },
  }),

  webhooksDomain.method({
    name: "webhooks.dispatch",
    summary:
      "Send an event now: `eventId` (an event of the tenant) to its matching subscriptions, or a `webhook.ping` test " +
      "event; `subscriptionId` narrows it to one subscription.",
    input: v.object({ tenantId: v.optional(TenantId), eventId: v.optional(Id), subscriptionId: v.optional(Id) }),
    auth: AUTH,
    output: v.object({ eventId: v.string(), deliveries: v.array(DeliveryView) }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: "/webhooks/dispatch" }],
    async handler(params, ctx) {
      const { deps, principal } = ctx;
      const only = params.subscriptionId ? await subscription(deps, principal, params.subscriptionId) : undefined;
      let event: EventRecord;
      if (params.eventId) {
        event = await reachable(deps, principal, await deps.events.get(params.eventId), "Event", params.eventId);
      } else {
        const tenant = await tenantOrPersonal(deps, principal, params.tenantId ?? only?.tenantId, TENANT_ACCESS.webhooks);
        event = await deps.events.publish({
          tenantId: tenant.id,
          topic: "webhook",
          type: "webhook.ping",
          source: "gateway",
          payload: { message: "ping" },
        });
      }
      if (only && only.tenantId !== event.tenantId) throw new ServiceError("NOT_FOUND", `Webhook subscription not found: ${only.id}`);
      const targets = only
        ? [only]
        : (await deps.webhooks.listSubscriptions(event.tenantId)).filter(
            (sub) => sub.enabled && (event.type === "webhook.ping" || matchesFilter(sub.filter, event)),
          );
      const deliveries = await deps.webhookWorker.fanOut(event, targets);
      return { eventId: event.id, deliveries: deliveries.map(deliveryView) };
    },
  }),

  webhooksDomain.method({
    name: "webhooks.deliveries.list",
    summary:
      "Deliveries of a tenant (or of one subscription), newest first: status, each attempt's status code, duration " +
      "and a bounded response snippet, the next attempt time.",
    input: v.object({
      tenantId: v.optional(TenantId),
      subscriptionId: v.optional(Id),
      status: v.optional(v.picklist(["pending", "succeeded", "failed"])),
      limit: v.optional(queryInt(1, 200), 50),
      cursor: v.optional(v.pipe(v.string(), v.maxLength(200))),
    }),
    auth: AUTH,
    output: v.object({ data: v.array(DeliveryView), nextCursor: v.nullable(v.string()) }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/webhooks/deliveries" }],
    async handler(params, ctx) {
      const { deps, principal } = ctx;
      const sub = params.subscriptionId ? await subscription(deps, principal, params.subscriptionId) : undefined;
      const tenant = sub ? { id: sub.tenantId } : await tenantOrPersonal(deps, principal, params.tenantId, TENANT_ACCESS.webhooks);
      // Cursor: `createdAt|id` of the last item of the previous page.
      const all = (await deps.webhooks.listDeliveries(tenant.id))
        .filter((d) => (!sub || d.subscriptionId === sub.id) && (!params.status || d.status === params.status))
        .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id));
      const start = params.cursor ? all.findIndex((d) => `${d.createdAt}|${d.id}` === params.cursor) + 1 : 0;
      const page = all.slice(start, start + params.limit);
      const more = start + params.limit < all.length;
      return { data: page.map(deliveryView), nextCursor: more && page.length ? `${page.at(-1)!.createdAt}|${page.at(-1)!.id}` : null };
    },
  }),

  webhooksDomain.method({
    name: "webhooks.deliveries.retry",
    summary: "Attempt a delivery again now (its schedule is unchanged); 409 while another attempt of it is in flight.",
    input: v.object({ delivery_id: Id }),
    auth: AUTH,
    output: DeliveryView,
    errors: { NOT_FOUND: {}, CONFLICT: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: "/webhooks/deliveries/:delivery_id/retry" }],
    async handler(params, ctx) {
      const delivery = await reachable(
        ctx.deps,
        ctx.principal,
        await ctx.deps.webhooks.getDelivery(params.delivery_id),
        "Webhook delivery",
        params.delivery_id,
      );
      const result = await ctx.deps.webhookWorker.attempt(delivery.id, { manual: true });
      if (!result) throw new ServiceError("CONFLICT", `An attempt of delivery ${delivery.id} is in flight`);
      return deliveryView(result);
    },
  }),
];
