import * as v from "valibot";
import type { Principal } from "../auth.js";
import { requireWorkspace } from "../workspaces/access.js";
import type { Role } from "../tenants/access.js";
import { ServiceError } from "../errors.js";
import { createKey, withinKeyQuota } from "./create-key.js";
import type { KeyRecord } from "../../storage/repos/keys.js";
import { nowIso } from "../../storage/ids.js";
import { ConsoleKeyView, Timestamp, WithSecret } from "../views.js";
import { emitUserEvent } from "../event-sink.js";
import { keysDomain, type KeysDeps, type KeysContext } from "./deps.js";
import { AllowListFields, withAllowLists } from "../allow-list.js";
import { changedFields, recordAudit } from "../audit.js";
import { keyChanges } from "./key-changes.js";

/** Scopes of a console-created platform key (docs/interface.md 2.4: `chat:write` by default). */
export const DEFAULT_PLATFORM_SCOPES = ["chat:write"];

export const Name = v.pipe(
  v.string("name must be a string"),
  v.trim(),
  v.minLength(1, "name is required"),
  v.maxLength(100, "name is at most 100 characters"),
);

/** spendLimit in credits; null removes the limit (docs/interface.md 8: per key, updatable). */
export const SpendLimit = v.nullable(
  v.pipe(
    v.number("spendLimit must be a number or null"),
    v.finite("spendLimit must be finite"),
    v.minValue(0, "spendLimit must not be negative"),
  ),
);
export const PerMinute = (field: string) =>
  v.nullable(
    v.pipe(
      v.number(`${field} must be a number or null`),
      v.integer(`${field} must be a whole number`),
      v.minValue(0, `${field} must not be negative`),
      v.maxValue(Number.MAX_SAFE_INTEGER, `${field} is too large`),
    ),
  );

export const ExpiresAt = v.pipe(
  v.string("expiresAt must be an ISO 8601 date string"),
  v.isoTimestamp("expiresAt must be an ISO 8601 timestamp, e.g. 2030-01-01T00:00:00Z"),
  v.transform((value) => new Date(value).toISOString()),
  v.check((value) => Date.parse(value) > Date.now(), "expiresAt must be in the future"),
  // Ten years is longer than any key should live; a later date is most likely a typo.
  v.check((value) => Date.parse(value) <= Date.now() + 10 * 366 * 86_400_000, "expiresAt must be within ten years"),
);

const KeyId = v.pipe(v.string(), v.minLength(1));

/** The console's view of a key (docs/interface.md 2.4 "list"): never the secret, its hash or its hint. */
export function consoleKeyView(record: KeyRecord) {
  return {
    id: record.id,
    name: record.name,
    createdAt: record.createdAt,
    expiresAt: record.expiresAt,
    lastUsedAt: record.lastUsedAt,
    scopes: record.scopes,
    spendLimit: record.spendLimit,
    rpmLimit: record.rpmLimit,
    tpmLimit: record.tpmLimit,
    // docs/interface.md 4.3 lists a key's fields: the allow-lists are added only to a key that has them.
    ...(record.allowedModels ? { allowedModels: record.allowedModels } : {}),
    ...(record.allowedTools ? { allowedTools: record.allowedTools } : {}),
  };
}

/**
 * A platform key of `workspaceId` (scope `chat:write`), made for `userId`, and the
 * `key.created` event under that user's tenant (docs/events.md): the console's create and the
 * admin command's `create-key`.
 */
export async function createPlatformKey(
  deps: KeysDeps,
  input: {
    workspaceId: string;
    userId: string;
    name: string;
    expiresAt?: string | null;
    spendLimit?: number | null;
    rpmLimit?: number | null;
    tpmLimit?: number | null;
    allowedModels?: string[] | null;
    allowedTools?: string[] | null;
  },
): Promise<{ record: KeyRecord; secret: string }> {
  const { workspaceId, ...rest } = input;
  const created = await createKey(deps, { ...rest, kind: "platform", owner: workspaceId, scopes: [...DEFAULT_PLATFORM_SCOPES] });
  emitUserEvent(deps, input.userId, "key.created", { keyId: created.record.id, kind: "platform", name: created.record.name });
  return created;
}

/** The tenant a workspace belongs to (its platform keys' audit records go there). */
async function tenantOfWorkspace(deps: KeysDeps, workspaceId: string): Promise<string | undefined> {
  return (await deps.tenants.getWorkspace(workspaceId))?.tenantId;
}

/** The caller's workspace's platform key, or the same 404 whether it is missing or another workspace's (docs/interface.md 3). */
async function ownKey(deps: KeysDeps, workspaceId: string, id: string): Promise<KeyRecord> {
  const record = await deps.keys.get(workspaceId, id);
  if (record?.kind !== "platform") throw new ServiceError("NOT_FOUND", "API key not found");
  return record;
}

/**
 * The workspace a console call acts on: the user's default one, or `workspaceId` when the
 * console picked another of their tenants' workspaces (a non-member gets the same 404 as for
 * a missing workspace; reading needs viewer, changing keys member).
 */
async function workspaceOf(ctx: KeysContext<Principal>, workspaceId: string | undefined, need: Role): Promise<string> {
  if (workspaceId && workspaceId !== ctx.principal.workspaceId)
    return (await requireWorkspace(ctx.deps, ctx.principal, workspaceId, need)).workspace.id;
  if (!ctx.principal.workspaceId) throw new ServiceError("FORBIDDEN", "This account has no workspace");
  return ctx.principal.workspaceId;
}

/** Optional on every console key call: which of the user's workspaces (default: their default one). */
const WorkspaceParam = { workspaceId: v.optional(v.pipe(v.string("workspaceId must be a string"), v.minLength(1), v.maxLength(128))) };

// docs/interface.md 5: "an API key can never create another key" — every method here accepts the console
// cookie and nothing else (facade/surfaces.ts reads no Authorization header on this surface).
const CONSOLE_ONLY = { kinds: ["console"] } as const;

export const consoleKeyMethods = [
  keysDomain.method({
    name: "console.keys.create",
    summary: "Create a platform key (`sk-<service>-…`) for the signed-in user's workspace; the plaintext is in this response only.",
    input: v.object({
      name: Name,
      /** Optional; the key is refused with 401 from this instant (docs/interface.md 3). */
      expiresAt: v.optional(v.nullable(ExpiresAt)),
      ...AllowListFields,
      ...WorkspaceParam,
    }),
    auth: CONSOLE_ONLY,
    output: v.object({ id: v.string(), name: v.string(), key: WithSecret.entries.key, createdAt: Timestamp }),
    errors: { VALIDATION_FAILED: {}, NOT_FOUND: {}, FORBIDDEN: {}, CONFLICT: {} },
    http: [{ surface: "console", method: "POST", path: "/api-keys", status: 201 }],
    async handler(params, ctx) {
      const principal = ctx.principal;
      const workspaceId = await workspaceOf(ctx, params.workspaceId, "member");
      // The signed-in user's key quota (QUOTA_KEYS_PER_USER, docs/quotas.md); an operator's `create-key` is not counted against it.
      const { record, secret } = await withinKeyQuota(ctx.deps, principal.userId, () =>
        createPlatformKey(ctx.deps, {
          workspaceId,
          userId: principal.userId,
          name: params.name,
          expiresAt: params.expiresAt ?? null,
          allowedModels: params.allowedModels ?? null,
          allowedTools: params.allowedTools ?? null,
        }),
      );
      await recordAudit(ctx, {
        action: "key.created",
        target: record.id,
        tenantId: await tenantOfWorkspace(ctx.deps, workspaceId),
        changes: { kind: "platform", workspaceId, ...keyChanges(record) },
      });
      ctx.responseHeaders.set("cache-control", "no-store");
      // docs/interface.md 4.3: exactly {id, name, key, createdAt}.
      return { id: record.id, name: record.name, key: secret, createdAt: record.createdAt };
    },
  }),

  keysDomain.method({
    name: "console.keys.list",
    summary: "The workspace's active platform keys, oldest first, as `{data: [...]}`; never the secrets.",
    input: v.object(WorkspaceParam),
    auth: CONSOLE_ONLY,
    output: v.object({ data: v.array(ConsoleKeyView) }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "console", method: "GET", path: "/api-keys" }],
    async handler(params, ctx) {
      const records = await ctx.deps.keys.list(await workspaceOf(ctx, params.workspaceId, "viewer"), "platform");
      return { data: records.map(consoleKeyView) };
    },
  }),

  keysDomain.method({
    name: "console.keys.update",
    summary: "Rename a platform key or change its spendLimit, rpmLimit, tpmLimit (null removes a limit).",
    input: v.pipe(
      v.object({
        id: KeyId,
        name: v.optional(Name),
        spendLimit: v.optional(SpendLimit),
        rpmLimit: v.optional(PerMinute("rpmLimit")),
        tpmLimit: v.optional(PerMinute("tpmLimit")),
        ...AllowListFields,
        ...WorkspaceParam,
      }),
      v.check(
        (input) => ["name", "spendLimit", "rpmLimit", "tpmLimit", "allowedModels", "allowedTools"].some((field) => field in input),
        "Provide at least one of name, spendLimit, rpmLimit, tpmLimit, allowedModels, allowedTools",
      ),
    ),
    auth: CONSOLE_ONLY,
    output: ConsoleKeyView,
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, FORBIDDEN: {} },
    http: [{ surface: "console", method: "PATCH", path: "/api-keys/:id" }],
    async handler(params, ctx) {
      const workspaceId = await workspaceOf(ctx, params.workspaceId, "member");
      const record = await ownKey(ctx.deps, workspaceId, params.id);
      const next: KeyRecord = withAllowLists({ ...record }, params);
      if (params.name !== undefined) next.name = params.name;
      if (params.spendLimit !== undefined) next.spendLimit = params.spendLimit;
      if (params.rpmLimit !== undefined) next.rpmLimit = params.rpmLimit;
      if (params.tpmLimit !== undefined) next.tpmLimit = params.tpmLimit;
      await ctx.deps.keys.update(next);
      await recordAudit(ctx, {
        action: "key.updated",
        target: record.id,
        tenantId: await tenantOfWorkspace(ctx.deps, workspaceId),
        changes: { kind: "platform", ...changedFields(params, ["id", "workspaceId"]) },
      });
      return consoleKeyView(next);
    },
  }),

  keysDomain.method({
    name: "console.keys.delete",
    summary: "Revoke a platform key permanently; it is refused with 401 from the next request on.",
    input: v.object({ id: KeyId, ...WorkspaceParam }),
    auth: CONSOLE_ONLY,
    output: v.object({ id: v.string(), revoked: v.boolean() }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "console", method: "DELETE", path: "/api-keys/:id" }],
    async handler(params, ctx) {
      const workspaceId = await workspaceOf(ctx, params.workspaceId, "member");
      const record = await ownKey(ctx.deps, workspaceId, params.id);
      await ctx.deps.keys.revoke(record, nowIso());
      emitUserEvent(ctx.deps, record.userId, "key.revoked", { keyId: record.id, kind: "platform" });
      await recordAudit(ctx, {
        action: "key.revoked",
        target: record.id,
        tenantId: await tenantOfWorkspace(ctx.deps, workspaceId),
        changes: { kind: "platform", workspaceId },
      });
      return { id: record.id, revoked: true };
    },
  }),
];
