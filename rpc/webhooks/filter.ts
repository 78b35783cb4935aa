import type { EventRecord } from "../../storage/events/event-log.js";

/** `*`, `agent.*` (a prefix), or an exact topic or type. */
export const FILTER_PATTERN = /^(\*|[a-z0-9]+(\.[a-z0-9_-]+)*(\.\*)?)$/;

/** True when one pattern matches the event's type or topic. */
export function matchesFilter(filter: readonly string[], event: Pick<EventRecord, "type" | "topic">): boolean {
  return filter.some((pattern) => {
    if (pattern === "*") return true;
    if (pattern.endsWith(".*")) {
      const prefix = pattern.slice(0, -1);
      return event.type.startsWith(prefix) || event.topic.startsWith(prefix) || event.topic === pattern.slice(0, -2);
    }
    return event.type === pattern || event.topic === pattern;
  });
}
