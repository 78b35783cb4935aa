import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { EventLog } from "../../storage/events/event-log.js";

/** What the events domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type EventsDeps = Pick<Repos, "users" | "tenants" | "members" | "agents"> &
  Pick<Ports, "config" | "log" | "sink" | "metrics"> & {
    events: EventLog;
  };

export const eventsDomain = domain<EventsDeps>("events");

/** The call context of a events handler or helper. */
export type EventsContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, EventsDeps>;
