import * as v from "valibot";
import { newId, nowIso } from "../../storage/ids.js";
import { WORKSPACE_STATUSES, type Workspace } from "../../storage/repos/tenants.js";
import { requireTenantAccess, tenantsOf } from "../tenants/access.js";
import { requireWorkspace } from "./access.js";
import { emitEvent } from "../event-sink.js";
import { workspacesDomain, type WorkspacesDeps } from "./deps.js";

const AUTH = { kinds: ["session", "gateway_key"] } as const;
/** Reading workspaces is also open to the console's cookie session (docs/console.md). */
const READ_AUTH = { kinds: ["session", "gateway_key", "console"] } as const;
const Id = (field: string) => v.pipe(v.string(`${field} must be a string`), v.minLength(1, `${field} is required`), v.maxLength(128));
const Status = v.picklist(WORKSPACE_STATUSES, `status must be one of: ${WORKSPACE_STATUSES.join(", ")}`);

export const WorkspaceView = v.object({
  id: v.string(),
  tenantId: v.string(),
  name: v.string(),
  status: v.picklist(WORKSPACE_STATUSES),
  creditBalance: v.pipe(v.number(), v.description("Micro-credits (1 credit = 1,000,000)")),
  keyCount: v.pipe(v.number(), v.description("Platform keys of the workspace, revoked ones not counted")),
  createdAt: v.string(),
  updatedAt: v.string(),
});

/** A workspace's name (`workspaces.create`, the admin command's `create-workspace`). */
export const WorkspaceName = v.pipe(
  v.string("name must be a string"),
  v.trim(),
  v.minLength(1, "name is required"),
  v.maxLength(100, "name: at most 100 characters"),
);

/** Stores a new active workspace of `tenantId`; its credit balance starts at 0. */
export async function createWorkspace(deps: Pick<WorkspacesDeps, "tenants">, tenantId: string, name: string): Promise<Workspace> {
  const now = nowIso();
  const workspace: Workspace = { id: newId("ws"), tenantId, name, status: "active", createdAt: now, updatedAt: now };
  await deps.tenants.putWorkspace(workspace);
  return workspace;
}

async function workspaceView(deps: WorkspacesDeps, workspace: Workspace) {
  const [creditBalance, keys] = await Promise.all([deps.credits.balance(workspace.id), deps.keys.list(workspace.id, "platform")]);
  return {
    id: workspace.id,
    tenantId: workspace.tenantId,
    name: workspace.name,
    status: workspace.status,
    creditBalance,
    keyCount: keys.length,
    createdAt: workspace.createdAt,
    updatedAt: workspace.updatedAt,
  };
}

/** Workspaces (docs/interface.md 4.4 "Platform foundation", docs/interface.md 3 transition; docs/tenants.md "Workspaces"). */
export const workspaceMethods = [
  workspacesDomain.method({
    name: "workspaces.list",
    summary:
      "Workspaces of every tenant the caller is a member of (or of `tenantId`), oldest first; active ones only unless `status` is `archived` or `all`.",
    input: v.object({
      tenantId: v.optional(Id("tenantId")),
      status: v.optional(v.picklist([...WORKSPACE_STATUSES, "all"], "status must be one of: active, archived, all"), "active"),
    }),
    auth: READ_AUTH,
    output: v.object({ workspaces: v.array(WorkspaceView), count: v.number() }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [
      { surface: "gateway", method: "GET", path: "/workspaces" },
      { surface: "console", method: "GET", path: "/workspaces" },
    ],
    async handler(params, ctx) {
      const { deps, principal } = ctx;
      const user = await deps.users.get(principal.userId);
      const tenants = params.tenantId
        ? [await requireTenantAccess(deps, principal, params.tenantId, "viewer")]
        : (await tenantsOf(deps, principal)).map(({ tenant }) => tenant);
      const lists = await Promise.all(
        tenants.map((tenant) => deps.tenants.workspacesOf(tenant.id, user && user.tenantId === tenant.id ? [user.workspaceId] : [])),
      );
      const workspaces = lists.flat().filter((workspace) => params.status === "all" || workspace.status === params.status);
      const views = await Promise.all(workspaces.map((workspace) => workspaceView(deps, workspace)));
      return { workspaces: views, count: views.length };
    },
  }),

  workspacesDomain.method({
    name: "workspaces.create",
    summary: "Admins: create an active workspace in a tenant (`tenantId`, `name`); its credit balance starts at 0.",
    input: v.object({
      tenantId: Id("tenantId"),
      name: WorkspaceName,
    }),
    auth: AUTH,
    output: WorkspaceView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {}, VALIDATION_FAILED: {} },
    http: [{ surface: "gateway", method: "POST", path: "/workspaces", status: 201 }],
    async handler(params, ctx) {
      const tenant = await requireTenantAccess(ctx.deps, ctx.principal, params.tenantId, "admin");
      return workspaceView(ctx.deps, await createWorkspace(ctx.deps, tenant.id, params.name));
    },
  }),

  workspacesDomain.method({
    name: "workspaces.get",
    summary:
      "A workspace with its status, credit balance (micro-credits) and platform key count; a non-member gets the same 404 as for a missing one.",
    input: v.object({ workspace_id: Id("workspace_id") }),
    auth: AUTH,
    output: WorkspaceView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/workspaces/:workspace_id" }],
    async handler(params, ctx) {
      const { workspace } = await requireWorkspace(ctx.deps, ctx.principal, params.workspace_id, "viewer");
      return workspaceView(ctx.deps, workspace);
    },
  }),

  workspacesDomain.method({
    name: "workspaces.update",
    summary:
      "Admins: move a workspace to `status` (query; docs/interface.md 3): `archived` refuses its platform keys with 403, spends " +
      "no credits and adds no artifacts; `active` restores all of it. Idempotent.",
    input: v.object({ workspace_id: Id("workspace_id"), status: Status }),
    auth: AUTH,
    output: WorkspaceView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {}, VALIDATION_FAILED: {} },
    http: [{ surface: "gateway", method: "PATCH", path: "/workspaces/:workspace_id" }],
    async handler(params, ctx) {
      const { workspace } = await requireWorkspace(ctx.deps, ctx.principal, params.workspace_id, "admin");
      if (workspace.status === params.status) return workspaceView(ctx.deps, workspace);
      const updated: Workspace = { ...workspace, status: params.status, updatedAt: nowIso() };
      await ctx.deps.tenants.putWorkspace(updated);
      emitEvent(ctx.deps, updated.tenantId, "workspace.status_changed", {
        workspaceId: updated.id,
        from: workspace.status,
        status: updated.status,
      });
      return workspaceView(ctx.deps, updated);
    },
  }),
];
