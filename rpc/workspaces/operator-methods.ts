import * as v from "valibot";
import { LOCAL_ADMIN } from "../auth.js";
import { ServiceError } from "../errors.js";
import { WORKSPACE_STATUSES } from "../../storage/repos/tenants.js";
import { createWorkspace, WorkspaceName } from "./methods.js";
import { workspacesDomain } from "./deps.js";

export const operatorWorkspacesCreate = workspacesDomain.method({
  name: "operator.workspaces.create",
  summary:
    "A new active workspace in the personal tenant of the user with `email` (named `name`, default Workspace); " +
    "`default: true` makes it the user's default workspace.",
  input: v.object({
    email: v.pipe(v.string("email must be a string"), v.trim(), v.minLength(1, "email is required"), v.maxLength(254)),
    name: v.optional(WorkspaceName, "Workspace"),
    default: v.optional(v.boolean("default must be true or false"), false),
  }),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({
    workspace: v.object({
      id: v.string(),
      tenantId: v.string(),
      name: v.string(),
      status: v.picklist(WORKSPACE_STATUSES),
      createdAt: v.string(),
      updatedAt: v.string(),
    }),
    default: v.boolean(),
  }),
  errors: { NOT_FOUND: {}, VALIDATION_FAILED: {} },
  async handler(params, ctx) {
    const user = await ctx.deps.users.byEmail(params.email);
    if (!user) throw new ServiceError("NOT_FOUND", `No user with email ${params.email}`);
    const workspace = await createWorkspace(ctx.deps, user.tenantId, params.name);
    if (params.default) await ctx.deps.users.put({ ...user, workspaceId: workspace.id });
    return { workspace, default: params.default };
  },
});

/**
 * Workspaces as the admin command makes them (docs/console-and-admin.md): an internal method,
 * reached only by dispatch from `npm run admin` as the local administrator, never over `/rpc`,
 * REST or OpenAPI. The workspace is made as `workspaces.create` makes one (`createWorkspace`).
 */
export const operatorWorkspaceMethods = [operatorWorkspacesCreate];
