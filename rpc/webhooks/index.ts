import { pick } from "../module.js";
import { webhooksDomain } from "./deps.js";
import { webhookMethods } from "./methods.js";
import { WebhookWorker } from "./worker.js";

/**
 * Webhooks (docs/webhooks.md): subscribes to every published event (`sink.onPublished`) and
 * fans it out to the tenant's matching subscriptions; the worker sends the deliveries.
 */
export const webhooksModule = webhooksDomain.module({
  methods: webhookMethods,
  init: (ports) => {
    const { config, log, secrets, resolveHost, sink, metrics } = ports;
    const webhookWorker: WebhookWorker = new WebhookWorker({
      config,
      log,
      metrics,
      repo: ports.repos.webhooks,
      secrets,
      resolveHost,
      // docs/events.md: a delivery out of attempts is itself an event, except for deliveries
      // of that event (no chain of failures about failures).
      async onFailed(delivery) {
        if (delivery.eventType === "webhook.delivery.failed") return;
        const last = delivery.attempts.at(-1);
        await sink.publish({
          tenantId: delivery.tenantId,
          topic: "webhook",
          type: "webhook.delivery.failed",
          source: "gateway",
          payload: {
            deliveryId: delivery.id,
            subscriptionId: delivery.subscriptionId,
            eventId: delivery.eventId,
            attempts: delivery.attempts.length,
            lastStatusCode: last?.statusCode ?? null,
            lastError: last?.error ?? null,
          },
        });
      },
    });
    // One stored fan-out job per event: publishing answers in constant time, whatever the
    // number of subscriptions (docs/webhooks.md "Fair delivery").
    sink.onPublished((event) => webhookWorker.published(event));
    webhookWorker.start();
    return {
      ...pick(ports, ["config", "log", "secrets", "resolveHost", "sink"]),
      ...pick(ports.repos, ["users", "tenants", "members", "agents", "webhooks", "quotas", "audit"]),
      events: ports.eventLog,
      webhookWorker,
    };
  },
  close: (deps) => deps.webhookWorker.close(),
});
