import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { EventLog } from "../../storage/events/event-log.js";
import type { WebhookWorker } from "./worker.js";

/** What the webhooks domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type WebhooksDeps = Pick<Repos, "users" | "tenants" | "members" | "agents" | "webhooks" | "quotas" | "audit"> &
  Pick<Ports, "config" | "log" | "secrets" | "resolveHost" | "sink"> & {
    events: EventLog;
    webhookWorker: WebhookWorker;
  };

export const webhooksDomain = domain<WebhooksDeps>("webhooks");

/** The call context of a webhooks handler or helper. */
export type WebhooksContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, WebhooksDeps>;
