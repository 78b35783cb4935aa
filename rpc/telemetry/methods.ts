import * as v from "valibot";
import { ServiceError } from "../errors.js";
import { randomBytes } from "node:crypto";
import { nowIso } from "../../storage/ids.js";
import { HOUR_MS, decodeCursor, type TelemetryEvent } from "../../storage/repos/telemetry-model.js";
import { callerTenant } from "../policies/telemetry-ingest.js";
import { EventSchema, MAX_FUTURE_MS } from "./event-schema.js";
import { telemetryDomain } from "./deps.js";

const AUTH = { kinds: ["session", "gateway_key"] } as const;
const MAX_BATCH = 500;
const DAY_MS = 86_400_000;

const Instant = (field: string) =>
  v.optional(
    v.pipe(
      v.string(`${field} must be an ISO 8601 date-time`),
      v.isoTimestamp(`${field} must be an ISO 8601 date-time such as 2030-01-31T12:00:00Z`),
      v.transform(Date.parse),
    ),
  );

function windowOf(params: { since?: number; until?: number }, retentionDays: number, defaultMs: number) {
  const now = Date.now();
  const until = params.until ?? now;
  const since = params.since ?? until - defaultMs;
  if (since >= until) throw new ServiceError("BAD_REQUEST", "since must be before until");
  const oldest = now - retentionDays * DAY_MS;
  return { since: Math.max(since, oldest - HOUR_MS), until };
}

/** Telemetry per tenant (docs/interface.md 4.4 "/telemetry"; docs/telemetry.md). */
export const telemetryMethods = [
  telemetryDomain.method({
    name: "telemetry.ingest",
    summary:
      `Records a batch of 1-${MAX_BATCH} events for the caller's tenant: 202 with accepted/rejected counts and a result per ` +
      "event (a bad event never sinks the batch). Limited per tenant by TELEMETRY_INGEST_PER_MINUTE.",
    input: v.object({
      events: v.pipe(
        v.array(v.unknown(), "events must be an array"),
        v.minLength(1, `events: a batch holds 1 to ${MAX_BATCH} events`),
        v.maxLength(MAX_BATCH, `events: a batch holds 1 to ${MAX_BATCH} events; split it`),
      ),
    }),
    auth: AUTH,
    policies: { ingest: "telemetry" },
    output: v.object({
      accepted: v.number(),
      rejected: v.number(),
      results: v.array(
        v.object({
          index: v.number(),
          status: v.picklist(["accepted", "rejected"]),
          id: v.optional(v.string()),
          errors: v.optional(v.array(v.string())),
        }),
      ),
    }),
    http: [{ surface: "gateway", method: "POST", path: "/telemetry/events", status: 202 }],
    async handler(params, ctx) {
      const tenantId = await callerTenant(ctx.deps.users, ctx.principal.userId);
      const now = Date.now();
      const oldest = now - ctx.deps.config.TELEMETRY_RETENTION_DAYS * DAY_MS;
      const receivedAt = nowIso();
      // One random draw per batch, not per event (it showed in the ingest profile): a random batch part and the index.
      const batchId = `tev_${randomBytes(9).toString("base64url").replace(/[-_]/g, "x")}`;
      const accepted: TelemetryEvent[] = [];
      const results = params.events.map((raw, index) => {
        const parsed = v.safeParse(EventSchema, raw);
        if (!parsed.success) {
          return {
            index,
            status: "rejected" as const,
            errors: parsed.issues.map((issue) => `${v.getDotPath(issue) ?? "event"}: ${issue.message}`),
          };
        }
        const event = parsed.output;
        const ts = typeof event.timestamp === "number" ? event.timestamp : Date.parse(event.timestamp);
        if (ts > now + MAX_FUTURE_MS)
          return { index, status: "rejected" as const, errors: ["timestamp: more than 5 minutes in the future"] };
        if (ts < oldest)
          return {
            index,
            status: "rejected" as const,
            errors: [`timestamp: older than the ${ctx.deps.config.TELEMETRY_RETENTION_DAYS}-day retention`],
          };
        const id = `${batchId}${index.toString(36).padStart(2, "0")}`;
        accepted.push({
          id,
          name: event.name,
          timestamp: new Date(ts).toISOString(),
          component: event.component,
          version: event.version,
          clientId: event.clientId,
          attributes: event.attributes,
          receivedAt,
        });
        return { index, status: "accepted" as const, id };
      });
      await ctx.deps.telemetry.ingest(tenantId, accepted);
      return { accepted: accepted.length, rejected: results.length - accepted.length, results };
    },
  }),

  telemetryDomain.method({
    name: "telemetry.list",
    summary:
      "The tenant's events, oldest first, in [since, until) (default: the last 24 hours), optionally of one name or " +
      "component; `cursor` continues a page (`nextCursor`, null at the end).",
    input: v.object({
      name: v.optional(v.pipe(v.string(), v.maxLength(128))),
      component: v.optional(v.pipe(v.string(), v.maxLength(64))),
      since: Instant("since"),
      until: Instant("until"),
      cursor: v.optional(
        v.pipe(
          v.string(),
          v.maxLength(200),
          v.check((cursor) => decodeCursor(cursor) !== undefined, "cursor is not one this endpoint returned"),
        ),
      ),
      limit: v.optional(
        v.pipe(
          v.union(
            [v.number(), v.pipe(v.string(), v.regex(/^\d+$/, "limit must be a whole number"), v.transform(Number))],
            "limit must be a whole number",
          ),
          v.number(),
          v.integer(),
          v.minValue(1, "limit: 1 to 1000"),
          v.maxValue(1000, "limit: 1 to 1000"),
        ),
        100,
      ),
    }),
    auth: AUTH,
    output: v.object({
      data: v.array(
        v.object({
          id: v.string(),
          name: v.string(),
          timestamp: v.string(),
          component: v.string(),
          version: v.string(),
          clientId: v.string(),
          attributes: v.record(v.string(), v.unknown()),
          receivedAt: v.string(),
        }),
      ),
      nextCursor: v.nullable(v.string()),
    }),
    errors: { BAD_REQUEST: {} },
    http: [{ surface: "gateway", method: "GET", path: "/telemetry/events" }],
    async handler(params, ctx) {
      const tenantId = await callerTenant(ctx.deps.users, ctx.principal.userId);
      const { since, until } = windowOf(params, ctx.deps.config.TELEMETRY_RETENTION_DAYS, DAY_MS);
      const page = await ctx.deps.telemetry.list(tenantId, {
        name: params.name,
        component: params.component,
        since,
        until,
        cursor: params.cursor,
        limit: params.limit,
      });
      return { data: page.events, nextCursor: page.cursor };
    },
  }),

  telemetryDomain.method({
    name: "telemetry.summary",
    summary:
      "Counts and distinct clients of the tenant's events in whole UTC hours covering [since, until) (default: the " +
      "last 24 hours), grouped by name, component, version or day; with `metric`, p50/p95/max of that numeric " +
      "attribute.",
    input: v.object({
      since: Instant("since"),
      until: Instant("until"),
      groupBy: v.optional(v.picklist(["name", "component", "version", "day"], "groupBy must be name, component, version or day"), "name"),
      metric: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_.]{0,63}$/, "metric: the name of a numeric attribute"))),
    }),
    auth: AUTH,
    output: v.object({
      since: v.string(),
      until: v.string(),
      groupBy: v.string(),
      metric: v.optional(v.string()),
      total: v.object({
        count: v.number(),
        clients: v.number(),
        metric: v.optional(
          v.object({ count: v.number(), p50: v.nullable(v.number()), p95: v.nullable(v.number()), max: v.nullable(v.number()) }),
        ),
      }),
      groups: v.array(
        v.object({
          key: v.string(),
          count: v.number(),
          clients: v.number(),
          metric: v.optional(
            v.object({ count: v.number(), p50: v.nullable(v.number()), p95: v.nullable(v.number()), max: v.nullable(v.number()) }),
          ),
        }),
      ),
    }),
    errors: { BAD_REQUEST: {} },
    http: [{ surface: "gateway", method: "GET", path: "/telemetry/summary" }],
    async handler(params, ctx) {
      const tenantId = await callerTenant(ctx.deps.users, ctx.principal.userId);
      const window = windowOf(params, ctx.deps.config.TELEMETRY_RETENTION_DAYS, DAY_MS);
      // Counts are kept per UTC hour: the window widens to whole hours and says so.
      const since = Math.floor(window.since / HOUR_MS) * HOUR_MS;
      const until = Math.ceil(window.until / HOUR_MS) * HOUR_MS;
      const summary = await ctx.deps.telemetry.summary(tenantId, { since, until, groupBy: params.groupBy, metric: params.metric });
      const groups =
        params.groupBy === "day"
          ? summary.groups.sort((a, b) => a.key.localeCompare(b.key))
          : summary.groups.sort((a, b) => b.count - a.count || a.key.localeCompare(b.key));
      return {
        since: new Date(since).toISOString(),
        until: new Date(until).toISOString(),
        groupBy: params.groupBy,
        ...(params.metric ? { metric: params.metric } : {}),
        total: summary.total,
        groups,
      };
    },
  }),
];
