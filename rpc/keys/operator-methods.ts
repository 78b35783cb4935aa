import * as v from "valibot";
import { LOCAL_ADMIN } from "../auth.js";
import { ServiceError } from "../errors.js";
import { createPlatformKey, ExpiresAt, Name, PerMinute, SpendLimit } from "./console-keys.js";
import { keysDomain } from "./deps.js";

export const operatorKeysCreate = keysDomain.method({
  name: "operator.keys.create",
  summary:
    "A platform key (scope chat:write) of workspace `workspaceId` for its tenant's owner, with optional limits and " +
    "expiry; the plaintext is in this answer only.",
  input: v.object({
    workspaceId: v.pipe(v.string("workspaceId must be a string"), v.trim(), v.minLength(1, "workspaceId is required"), v.maxLength(128)),
    name: Name,
    expiresAt: v.optional(v.nullable(ExpiresAt), null),
    spendLimit: v.optional(SpendLimit, null),
    rpmLimit: v.optional(PerMinute("rpmLimit"), null),
    tpmLimit: v.optional(PerMinute("tpmLimit"), null),
  }),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({
    id: v.string(),
    name: v.string(),
    workspaceId: v.string(),
    key: v.string(),
    scopes: v.array(v.string()),
    createdAt: v.string(),
    expiresAt: v.nullable(v.string()),
    spendLimit: v.nullable(v.number()),
    rpmLimit: v.nullable(v.number()),
    tpmLimit: v.nullable(v.number()),
  }),
  errors: { NOT_FOUND: {}, VALIDATION_FAILED: {} },
  async handler(params, ctx) {
    const workspace = await ctx.deps.tenants.getWorkspace(params.workspaceId);
    if (!workspace) throw new ServiceError("NOT_FOUND", `Workspace not found: ${params.workspaceId}`);
    const tenant = await ctx.deps.tenants.getTenant(workspace.tenantId);
    if (!tenant) throw new ServiceError("NOT_FOUND", `Workspace ${workspace.id} belongs to no tenant`);
    const { record, secret } = await createPlatformKey(ctx.deps, { ...params, workspaceId: workspace.id, userId: tenant.ownerId });
    return {
      id: record.id,
      name: record.name,
      workspaceId: record.owner,
      key: secret,
      scopes: record.scopes,
      createdAt: record.createdAt,
      expiresAt: record.expiresAt,
      spendLimit: record.spendLimit,
      rpmLimit: record.rpmLimit,
      tpmLimit: record.tpmLimit,
    };
  },
});

/**
 * A workspace's platform keys as the admin command makes them (docs/console-and-admin.md): an
 * internal method, reached only by dispatch from `npm run admin` as the local administrator,
 * never over `/rpc`, REST or OpenAPI. The key is made, and `key.created` emitted, as the
 * console makes one (`createPlatformKey`), for the owner of the workspace's tenant.
 */
export const operatorKeyMethods = [operatorKeysCreate];
