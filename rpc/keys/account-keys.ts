import * as v from "valibot";
import { ServiceError } from "../errors.js";
import { createKeyWithinQuota } from "./create-key.js";
import { keyLabel, type KeyPrefixes } from "../credentials/api-keys.js";
import type { KeyRecord } from "../../storage/repos/keys.js";
import { nowIso } from "../../storage/ids.js";
import { AccountKeyView, WithSecret } from "../views.js";
import { KEYS_NEED_A_SESSION_OR_CONSOLE } from "./session-only.js";
import { emitUserEvent } from "../event-sink.js";
import { keysDomain } from "./deps.js";
import { AllowListFields, allowListView, withAllowLists } from "../allow-list.js";
import { changedFields, recordAudit } from "../audit.js";
import { keyChanges } from "./key-changes.js";

/** docs/interface.md 5: personal keys carry `intelligence` and/or `compute`; keys made today carry both. */
export const ACCOUNT_SCOPES = ["intelligence", "compute"] as const;

function view(record: KeyRecord, prefixes: KeyPrefixes) {
  return {
    id: record.id,
    name: record.name,
    scopes: record.scopes,
    /** The fixed prefix and the key's public id, to recognise it; never a part of the secret. */
    prefix: keyLabel(prefixes, record),
    createdAt: record.createdAt,
    lastUsedAt: record.lastUsedAt,
    ...allowListView(record),
  };
}

// Personal keys are managed by the signed-in user (a Gateway session token, or the console's
// cookie), never by a key: a leaked key cannot mint or revoke others (docs/interface.md 2.4 "created in
// account settings").
const SIGNED_IN = KEYS_NEED_A_SESSION_OR_CONSOLE;

export const accountKeyMethods = [
  keysDomain.method({
    name: "account.keys.list",
    summary: "The signed-in user's personal (Account API) keys; never the secrets.",
    input: v.object({}),
    auth: SIGNED_IN,
    output: v.object({ data: v.array(AccountKeyView) }),
    http: [
      { surface: "account", method: "GET", path: "/keys" },
      { surface: "console", method: "GET", path: "/personal-keys" },
    ],
    async handler(_params, ctx) {
      const records = await ctx.deps.keys.list(ctx.principal.userId, "account");
      return { data: records.map((record) => view(record, ctx.deps.keyPrefixes)) };
    },
  }),

  keysDomain.method({
    name: "account.keys.create",
    summary:
      "Create a personal key (`<ACCOUNT_KEY_PREFIX>…`) with scopes intelligence and compute, or a subset; the plaintext is shown once.",
    input: v.object({
      name: v.pipe(v.string("name must be a string"), v.trim(), v.minLength(1, "name is required"), v.maxLength(100)),
      scopes: v.optional(
        v.pipe(
          v.array(v.picklist(ACCOUNT_SCOPES, `scopes may only contain ${ACCOUNT_SCOPES.join(", ")}`), "scopes must be an array"),
          v.minLength(1, "scopes must not be empty"),
          v.transform((scopes) => ACCOUNT_SCOPES.filter((scope) => scopes.includes(scope))),
        ),
      ),
      ...AllowListFields,
    }),
    auth: SIGNED_IN,
    output: v.object({ ...AccountKeyView.entries, ...WithSecret.entries }),
    errors: { CONFLICT: {} },
    http: [
      { surface: "account", method: "POST", path: "/keys", status: 201 },
      { surface: "console", method: "POST", path: "/personal-keys", status: 201 },
    ],
    async handler(params, ctx) {
      const userId = ctx.principal.userId;
      const { record, secret } = await createKeyWithinQuota(ctx.deps, {
        kind: "account",
        owner: userId,
        userId,
        name: params.name,
        scopes: params.scopes ?? [...ACCOUNT_SCOPES],
        allowedModels: params.allowedModels ?? null,
        allowedTools: params.allowedTools ?? null,
      });
      await recordAudit(ctx, { action: "key.created", target: record.id, changes: { kind: "account", ...keyChanges(record) } });
      ctx.responseHeaders.set("cache-control", "no-store");
      emitUserEvent(ctx.deps, userId, "key.created", { keyId: record.id, kind: "account", name: record.name });
      return { ...view(record, ctx.deps.keyPrefixes), key: secret };
    },
  }),

  keysDomain.method({
    name: "account.keys.delete",
    summary: "Revoke one of the signed-in user's personal keys; it is refused with 401 from the next request on.",
    input: v.object({ id: v.pipe(v.string(), v.minLength(1)) }),
    auth: SIGNED_IN,
    output: v.object({ id: v.string(), revoked: v.boolean() }),
    errors: { NOT_FOUND: {} },
    http: [
      { surface: "account", method: "DELETE", path: "/keys/:id" },
      { surface: "console", method: "DELETE", path: "/personal-keys/:id" },
    ],
    async handler(params, ctx) {
      const record = await ctx.deps.keys.get(ctx.principal.userId, params.id);
      if (record?.kind !== "account") throw new ServiceError("NOT_FOUND", "Key not found");
      await ctx.deps.keys.revoke(record, nowIso());
      emitUserEvent(ctx.deps, record.userId, "key.revoked", { keyId: record.id, kind: "account" });
      await recordAudit(ctx, { action: "key.revoked", target: record.id, changes: { kind: "account" } });
      return { id: record.id, revoked: true };
    },
  }),

  keysDomain.method({
    name: "account.keys.update",
    summary:
      "Rename one of the signed-in user's personal keys or change its allow-lists (allowedModels, allowedTools: glob patterns; null allows everything).",
    input: v.pipe(
      v.object({
        id: v.pipe(v.string(), v.minLength(1)),
        name: v.optional(v.pipe(v.string("name must be a string"), v.trim(), v.minLength(1, "name is required"), v.maxLength(100))),
        ...AllowListFields,
      }),
      v.check(
        (input) => ["name", "allowedModels", "allowedTools"].some((field) => field in input),
        "Provide at least one of name, allowedModels, allowedTools",
      ),
    ),
    auth: SIGNED_IN,
    output: AccountKeyView,
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {} },
    http: [
      { surface: "account", method: "PATCH", path: "/keys/:id" },
      { surface: "console", method: "PATCH", path: "/personal-keys/:id" },
    ],
    async handler(params, ctx) {
      const record = await ctx.deps.keys.get(ctx.principal.userId, params.id);
      if (record?.kind !== "account") throw new ServiceError("NOT_FOUND", "Key not found");
      const next = withAllowLists({ ...record }, params);
      if (params.name !== undefined) next.name = params.name;
      await ctx.deps.keys.update(next);
      await recordAudit(ctx, { action: "key.updated", target: record.id, changes: { kind: "account", ...changedFields(params, ["id"]) } });
      return view(next, ctx.deps.keyPrefixes);
    },
  }),
];
