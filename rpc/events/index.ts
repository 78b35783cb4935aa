import { pick } from "../module.js";
import { eventsDomain } from "./deps.js";
import { eventMethods } from "./methods.js";

/** The event bus as users see it: publish, list, subscribe, acknowledge (docs/events.md). */
export const eventsModule = eventsDomain.module({
  methods: eventMethods,
  init: (ports) => ({
    ...pick(ports, ["config", "log", "sink", "metrics"]),
    ...pick(ports.repos, ["users", "tenants", "members", "agents"]),
    events: ports.eventLog,
  }),
});
