import * as v from "valibot";
import { requireTenantAccess } from "./access.js";
import { queryInt } from "../validate.js";
import { tenantsDomain } from "./deps.js";

const AuditView = v.object({
  id: v.string(),
  tenantId: v.string(),
  at: v.string(),
  actor: v.object({ kind: v.string(), userId: v.nullable(v.string()), keyId: v.nullable(v.string()) }),
  action: v.pipe(v.string(), v.description("`<object>.<verb>`, e.g. key.created, member.role_changed (docs/audit.md)")),
  target: v.pipe(v.string(), v.description("The id of what changed")),
  requestId: v.string(),
  changes: v.pipe(v.record(v.string(), v.unknown()), v.description("What changed; secrets are never recorded")),
});

/** The audit log of a tenant (docs/audit.md). */
export const auditMethods = [
  tenantsDomain.method({
    name: "tenants.audit.list",
    summary:
      "Owners and admins: the tenant's audit log, newest first: who (user, key or service) changed what (keys, members and " +
      "roles, tenant settings and allow-lists, credits, models, MCP servers, webhooks), when, in which request, with a " +
      "redacted summary. Paged by `cursor` (the `nextCursor` of the previous page).",
    input: v.object({
      tenant_id: v.pipe(v.string("tenant_id must be a string"), v.minLength(1), v.maxLength(128)),
      limit: v.optional(queryInt(1, 200), 50),
      cursor: v.optional(v.pipe(v.string("cursor must be a string"), v.regex(/^[0-9a-f]{1,64}$/, "cursor is not one this API gave"))),
    }),
    auth: { kinds: ["session", "gateway_key"] },
    output: v.object({ data: v.array(AuditView), nextCursor: v.nullable(v.string()) }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {}, VALIDATION_FAILED: {} },
    http: [{ surface: "gateway", method: "GET", path: "/tenants/:tenant_id/audit" }],
    async handler(params, ctx) {
      // A non-member gets the same 404 as for a missing tenant; a member below admin gets 403.
      const tenant = await requireTenantAccess(ctx.deps, ctx.principal, params.tenant_id, "admin");
      const { records, more } = await ctx.deps.audit.page(tenant.id, {
        ...(params.cursor !== undefined ? { after: params.cursor } : {}),
        limit: params.limit,
      });
      return { data: records, nextCursor: more && records.length ? records.at(-1)!.id : null };
    },
  }),
];
