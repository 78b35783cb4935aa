import * as v from "valibot";
import { ServiceError } from "../errors.js";
import { newId, nowIso } from "../../storage/ids.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import type { Role } from "../../storage/repos/members.js";
import { agentCount } from "./tenancy.js";
import { requireTenantAccess, roleIn, tenantsOf } from "./access.js";
import { monthKey } from "../time.js";
import { TenantView } from "../views.js";
import { emitEvent } from "../event-sink.js";
import { tenantsDomain, type TenantsDeps } from "./deps.js";
import { AllowListFields, allowListView, withAllowLists } from "../allow-list.js";
import { changedFields, recordAudit } from "../audit.js";

const Slug = v.pipe(
  v.string("slug must be a string"),
  v.regex(
    /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/,
    "slug: lowercase letters, digits and -, 1-63 characters, not starting or ending with -",
  ),
);
const Name = v.pipe(v.string("name must be a string"), v.trim(), v.minLength(1, "name is required"), v.maxLength(100));
/** Spec 2.7 leaves plan and region values open: short lowercase tokens. */
const Token = (field: string) =>
  v.pipe(
    v.string(`${field} must be a string`),
    v.regex(/^[a-z0-9][a-z0-9._-]{0,31}$/, `${field}: lowercase letters, digits, . _ - (1-32)`),
  );
const Count = (field: string, max: number) =>
  v.pipe(
    v.number(`${field} must be a number`),
    v.integer(`${field} must be an integer`),
    v.minValue(0, `${field} must be 0 or more`),
    v.maxValue(max),
  );
const Limits = v.object(
  {
    agents: v.optional(Count("limits.agents", 1_000_000)),
    tokensPerMonth: v.optional(Count("limits.tokensPerMonth", Number.MAX_SAFE_INTEGER)),
  },
  "limits must be an object {agents, tokensPerMonth}",
);
const TenantId = v.pipe(v.string("tenant_id must be a string"), v.minLength(1), v.maxLength(128));

const AUTH = { kinds: ["session", "gateway_key"] } as const;

/** A tenant as the API shows it, with how much of its limits is used. */
async function tenantView(deps: TenantsDeps, tenant: Tenant, role?: Role | null) {
  const [agents, tokens] = await Promise.all([agentCount(deps, tenant), deps.money.tenantTokensUsed(tenant.id)]);
  return {
    id: tenant.id,
    slug: tenant.slug,
    name: tenant.name,
    plan: tenant.plan,
    region: tenant.region,
    limits: tenant.limits,
    usage: { agents, tokensThisMonth: tokens, month: monthKey() },
    ownerId: tenant.ownerId,
    ...(role ? { role } : {}),
    createdAt: tenant.createdAt,
    updatedAt: tenant.updatedAt,
    ...allowListView(tenant),
  };
}

/** Tenants on the Gateway (docs/interface.md 4.4 "Platform foundation"): each belongs to the user who created it. */
export const tenantMethods = [
  tenantsDomain.method({
    name: "tenants.list",
    summary: "The tenants the caller is a member of, with their role: the personal one first, then the others, oldest first.",
    input: v.object({}),
    auth: AUTH,
    output: v.array(TenantView),
    http: [{ surface: "gateway", method: "GET", path: "/tenants" }],
    async handler(_params, ctx) {
      const tenants = await tenantsOf(ctx.deps, ctx.principal);
      return Promise.all(tenants.map(({ tenant, role }) => tenantView(ctx.deps, tenant, role)));
    },
  }),

  tenantsDomain.method({
    name: "tenants.create",
    summary:
      "Create a tenant (docs/interface.md 2.7): slug (unique, 409 when taken), name, plan, region, limits {agents, " +
      "tokensPerMonth} (defaults TENANT_DEFAULT_AGENT_LIMIT, TENANT_DEFAULT_TOKENS_PER_MONTH).",
    input: v.object({
      slug: Slug,
      name: Name,
      plan: v.optional(Token("plan"), "free"),
      region: v.optional(Token("region"), "default"),
      limits: v.optional(Limits, {}),
    }),
    auth: AUTH,
    output: TenantView,
    errors: { CONFLICT: {}, VALIDATION_FAILED: {} },
    http: [{ surface: "gateway", method: "POST", path: "/tenants", status: 201 }],
    async handler(params, ctx) {
      const principal = ctx.principal;
      const { config } = ctx.deps;
      const id = newId("ten");
      if (!(await ctx.deps.tenants.claimSlug(params.slug, id))) {
        throw new ServiceError("CONFLICT", `The slug ${params.slug} is taken`, { details: { slug: params.slug } });
      }
      const now = nowIso();
      const tenant: Tenant = {
        id,
        slug: params.slug,
        name: params.name,
        plan: params.plan,
        region: params.region,
        limits: {
          agents: params.limits.agents ?? config.TENANT_DEFAULT_AGENT_LIMIT,
          tokensPerMonth: params.limits.tokensPerMonth ?? config.TENANT_DEFAULT_TOKENS_PER_MONTH,
        },
        ownerId: principal.userId,
        createdAt: now,
        updatedAt: now,
      };
      try {
        await ctx.deps.tenants.putTenant(tenant);
        await ctx.deps.agents.addOwnedTenant(principal.userId, id);
        await ctx.deps.members.seed(id, principal.userId, now);
      } catch (error) {
        await ctx.deps.tenants.releaseSlug(params.slug, id).catch(() => undefined);
        throw error;
      }
      await recordAudit(ctx, { action: "tenant.created", target: id, tenantId: id, changes: changedFields(params) });
      return tenantView(ctx.deps, tenant, "owner");
    },
  }),

  tenantsDomain.method({
    name: "tenants.get",
    summary:
      "A tenant the caller is a member of (any role), with its usage and the caller's role; a non-member gets the same 404 as for a missing tenant.",
    input: v.object({ tenant_id: TenantId }),
    auth: AUTH,
    output: TenantView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/tenants/:tenant_id" }],
    async handler(params, ctx) {
      const tenant = await requireTenantAccess(ctx.deps, ctx.principal, params.tenant_id, "viewer");
      return tenantView(ctx.deps, tenant, await roleIn(ctx.deps, ctx.principal.userId, tenant));
    },
  }),

  tenantsDomain.method({
    name: "tenants.update",
    summary:
      "Admins: change a tenant's name, plan, region, limits (each limit on its own) or the allow-lists every caller of the tenant " +
      "is held to (allowedModels, allowedTools: glob patterns; null allows everything). Lowering limits.agents below the current " +
      "count blocks new agents only.",
    input: v.object({
      tenant_id: TenantId,
      name: v.optional(Name),
      plan: v.optional(Token("plan")),
      region: v.optional(Token("region")),
      limits: v.optional(Limits),
      ...AllowListFields,
    }),
    auth: AUTH,
    output: TenantView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {}, VALIDATION_FAILED: {} },
    http: [{ surface: "gateway", method: "PATCH", path: "/tenants/:tenant_id" }],
    async handler(params, ctx) {
      const tenant = await requireTenantAccess(ctx.deps, ctx.principal, params.tenant_id, "admin");
      const updated: Tenant = {
        ...withAllowLists(tenant, params),
        ...(params.name !== undefined ? { name: params.name } : {}),
        ...(params.plan !== undefined ? { plan: params.plan } : {}),
        ...(params.region !== undefined ? { region: params.region } : {}),
        limits: {
          agents: params.limits?.agents ?? tenant.limits.agents,
          tokensPerMonth: params.limits?.tokensPerMonth ?? tenant.limits.tokensPerMonth,
        },
        updatedAt: nowIso(),
      };
      await ctx.deps.tenants.putTenant(updated);
      await recordAudit(ctx, {
        action: "tenant.updated",
        target: updated.id,
        tenantId: updated.id,
        changes: changedFields(params, ["tenant_id"]),
      });
      emitEvent(ctx.deps, updated.id, "tenant.updated", {
        tenantId: updated.id,
        fields: Object.keys(params).filter((key) => key !== "tenant_id"),
      });
      return tenantView(ctx.deps, updated, await roleIn(ctx.deps, ctx.principal.userId, updated));
    },
  }),
];
