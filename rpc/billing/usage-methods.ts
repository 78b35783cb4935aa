import * as v from "valibot";
import type { Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import { tenantOrPersonal } from "../tenants/access.js";
import { USAGE_FIELDS, type UsageCounts, type UsageDims } from "../../storage/repos/usage.js";
import { ProxyPath } from "./proxy.js";
import { billingDomain, type BillingContext } from "./deps.js";

// The console's cookie session reads the same reports (docs/console.md).
const AUTH = { kinds: ["session", "gateway_key", "console"] } as const;
const Day = (field: string) =>
  v.pipe(v.string(`${field} must be a string`), v.regex(/^\d{4}-\d{2}-\d{2}$/, `${field} must be a day, YYYY-MM-DD`));
const Window = {
  tenantId: v.optional(v.pipe(v.string("tenantId must be a string"), v.minLength(1), v.maxLength(128))),
  from: v.optional(Day("from")),
  to: v.optional(Day("to")),
};
const Counts = {
  requests: v.number(),
  inputTokens: v.number(),
  outputTokens: v.number(),
  credits: v.pipe(v.number(), v.description("micro-credits")),
  agentRuns: v.number(),
};

/** Days a report covers when `from` is not given (ending today, UTC). */
const DEFAULT_DAYS = 30;

type Row = UsageDims & UsageCounts;

const zero = (): UsageCounts => Object.fromEntries(USAGE_FIELDS.map((field) => [field, 0])) as UsageCounts;
function add(into: UsageCounts, row: UsageCounts): UsageCounts {
  for (const field of USAGE_FIELDS) into[field] += row[field];
  return into;
}

/** Sums rows by a key; rows whose key is undefined are left out. */
function groupBy<K extends string>(rows: Row[], name: K, keyOf: (row: Row) => string | undefined) {
  const groups = new Map<string, UsageCounts>();
  for (const row of rows) {
    const key = keyOf(row);
    if (key === undefined) continue;
    groups.set(key, add(groups.get(key) ?? zero(), row));
  }
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, counts]) => ({ [name]: key, ...counts }) as Record<K, string> & UsageCounts);
}

async function window(ctx: BillingContext<Principal>, params: { tenantId?: string; from?: string; to?: string }) {
  const tenant = await tenantOrPersonal(ctx.deps, ctx.principal, params.tenantId, "viewer");
  const to = params.to ?? new Date().toISOString().slice(0, 10);
  const from = params.from ?? new Date(Date.parse(`${to}T00:00:00Z`) - (DEFAULT_DAYS - 1) * 86_400_000).toISOString().slice(0, 10);
  if (from > to)
    throw new ServiceError("VALIDATION_FAILED", "Invalid request: from must not be after to", {
      details: { issues: [{ path: "from", message: "after to" }] },
    });
  const rows = await ctx.deps.usage.rows(tenant.id, from, to);
  return { tenant, from, to, rows };
}

/** The reports of GET /usage/{path} (docs/billing.md "Usage"). */
const REPORTS = {
  daily: (rows: Row[]) => groupBy(rows, "day", (row) => row.day),
  models: (rows: Row[]) => groupBy(rows, "model", (row) => row.model),
  keys: (rows: Row[]) => groupBy(rows, "keyId", (row) => row.keyId),
  agents: (rows: Row[]) => groupBy(rows, "agentId", (row) => row.agentId),
} as const;

/** Usage from the gateway's own metering (docs/interface.md 4.4 `/billing/usage`, `/usage/{path}`). */
export const usageMethods = [
  billingDomain.method({
    name: "billing.usage",
    summary:
      "The tenant's usage (the caller's personal tenant, or `tenantId`) from `from` to `to` (days, UTC; default the " +
      "last 30): totals, by surface, and per workspace with its credit balance. Credits are micro-credits taken from " +
      "workspace balances.",
    input: v.object(Window),
    auth: AUTH,
    output: v.object({
      tenantId: v.string(),
      from: v.string(),
      to: v.string(),
      totals: v.object(Counts),
      surfaces: v.array(v.object({ surface: v.string(), ...Counts })),
      workspaces: v.array(
        v.object({ workspaceId: v.string(), name: v.string(), status: v.string(), creditBalance: v.number(), ...Counts }),
      ),
    }),
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, FORBIDDEN: {} },
    http: [
      { surface: "gateway", method: "GET", path: "/billing/usage" },
      { surface: "console", method: "GET", path: "/billing/usage" },
    ],
    async handler(params, ctx) {
      const { tenant, from, to, rows } = await window(ctx, params);
      const totals = rows.reduce((sum, row) => add(sum, row), zero());
      const user = await ctx.deps.users.get(ctx.principal.userId);
      const workspaces = await ctx.deps.tenants.workspacesOf(tenant.id, user?.tenantId === tenant.id ? [user.workspaceId] : []);
      const perWorkspace = groupBy(rows, "workspaceId", (row) => row.workspaceId);
      return {
        tenantId: tenant.id,
        from,
        to,
        totals,
        surfaces: groupBy(rows, "surface", (row) => row.surface),
        workspaces: await Promise.all(
          workspaces.map(async (workspace) => ({
            ...(perWorkspace.find((entry) => entry.workspaceId === workspace.id) ?? { workspaceId: workspace.id, ...zero() }),
            name: workspace.name,
            status: workspace.status,
            creditBalance: await ctx.deps.credits.balance(workspace.id),
          })),
        ),
      };
    },
  }),

  billingDomain.method({
    name: "usage.report",
    summary:
      "A usage report of the tenant (personal, or `tenantId`) from `from` to `to`: `daily`, `models`, `keys` or " +
      "`agents` (GET /usage/daily …); each row has requests, inputTokens, outputTokens, credits and agentRuns. " +
      "Another path is 404; a path with `..` is 400.",
    input: v.object({ path: ProxyPath, ...Window }),
    auth: AUTH,
    output: v.object({
      tenantId: v.string(),
      from: v.string(),
      to: v.string(),
      report: v.string(),
      rows: v.array(v.record(v.string(), v.union([v.string(), v.number()]))),
    }),
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, FORBIDDEN: {} },
    http: [
      { surface: "gateway", method: "GET", path: "/usage/**:path" },
      { surface: "console", method: "GET", path: "/usage/**:path" },
    ],
    async handler(params, ctx) {
      const report = REPORTS[params.path as keyof typeof REPORTS];
      if (!Object.hasOwn(REPORTS, params.path) || !report) {
        throw new ServiceError("NOT_FOUND", `Unknown usage report: ${params.path} (known: ${Object.keys(REPORTS).join(", ")})`);
      }
      const { tenant, from, to, rows } = await window(ctx, params);
      return { tenantId: tenant.id, from, to, report: params.path, rows: report(rows) };
    },
  }),
];
