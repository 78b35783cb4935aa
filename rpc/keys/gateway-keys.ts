import * as v from "valibot";
import { ServiceError } from "../errors.js";
import { createKeyWithinQuota } from "./create-key.js";
import { keyLabel, type KeyPrefixes } from "../credentials/api-keys.js";
import { ExpiresAt } from "./console-keys.js";
import { KEYS_NEED_A_SESSION_OR_CONSOLE } from "./session-only.js";
import type { KeyRecord } from "../../storage/repos/keys.js";
import { nowIso } from "../../storage/ids.js";
import { GatewayKeyView, WithSecret } from "../views.js";
import { emitUserEvent } from "../event-sink.js";
import { keysDomain } from "./deps.js";
import { AllowListFields, allowListView, withAllowLists } from "../allow-list.js";
import { changedFields, recordAudit } from "../audit.js";
import { keyChanges } from "./key-changes.js";

function view(record: KeyRecord, prefixes: KeyPrefixes) {
  return {
    id: record.id,
    name: record.name,
    description: record.description ?? "",
    prefix: keyLabel(prefixes, record),
    createdAt: record.createdAt,
    lastUsedAt: record.lastUsedAt,
    expiresAt: record.expiresAt,
    ...allowListView(record),
  };
}

export const gatewayKeyMethods = [
  keysDomain.method({
    name: "auth.keys.list",
    summary: "The caller's gateway API keys (never the secrets).",
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key", "console"] },
    output: v.array(GatewayKeyView),
    http: [
      { surface: "gateway", method: "GET", path: "/auth/keys" },
      { surface: "console", method: "GET", path: "/gateway-keys" },
    ],
    async handler(_params, ctx) {
      const records = await ctx.deps.keys.list(ctx.principal.userId, "gateway");
      return records.map((record) => view(record, ctx.deps.keyPrefixes));
    },
  }),

  keysDomain.method({
    name: "auth.keys.create",
    summary: "Create a gateway API key (`sk_…`); the plaintext is in this response only.",
    input: v.object({
      name: v.pipe(v.string("name must be a string"), v.trim(), v.minLength(1, "name is required"), v.maxLength(100)),
      description: v.optional(v.pipe(v.string("description must be a string"), v.maxLength(500)), ""),
      /** When the key stops working (401 from then on); never when absent (docs/interface.md 5: gateway keys). */
      expiresAt: v.optional(v.nullable(ExpiresAt)),
      ...AllowListFields,
    }),
    // Keys are made by a signed-in user (session token or console cookie), never by another key (docs/interface.md 5).
    auth: KEYS_NEED_A_SESSION_OR_CONSOLE,
    output: v.object({ ...GatewayKeyView.entries, ...WithSecret.entries }),
    errors: { CONFLICT: {} },
    http: [
      { surface: "gateway", method: "POST", path: "/auth/keys", status: 201 },
      { surface: "console", method: "POST", path: "/gateway-keys", status: 201 },
    ],
    async handler(params, ctx) {
      const userId = ctx.principal.userId;
      const { record, secret } = await createKeyWithinQuota(ctx.deps, {
        kind: "gateway",
        owner: userId,
        userId,
        name: params.name,
        description: params.description,
        scopes: ["*"],
        expiresAt: params.expiresAt ?? null,
        allowedModels: params.allowedModels ?? null,
        allowedTools: params.allowedTools ?? null,
      });
      emitUserEvent(ctx.deps, userId, "key.created", { keyId: record.id, kind: "gateway", name: record.name });
      await recordAudit(ctx, { action: "key.created", target: record.id, changes: { kind: "gateway", ...keyChanges(record) } });
      return { ...view(record, ctx.deps.keyPrefixes), key: secret };
    },
  }),

  keysDomain.method({
    name: "auth.keys.delete",
    summary: "Revoke one of the caller's gateway keys; it is refused from the next request on.",
    input: v.object({ key_id: v.pipe(v.string(), v.minLength(1)) }),
    auth: KEYS_NEED_A_SESSION_OR_CONSOLE,
    output: v.object({ success: v.boolean(), id: v.string() }),
    errors: { NOT_FOUND: {} },
    http: [
      { surface: "gateway", method: "DELETE", path: "/auth/keys/:key_id" },
      { surface: "console", method: "DELETE", path: "/gateway-keys/:key_id" },
    ],
    async handler(params, ctx) {
      const record = await ctx.deps.keys.get(ctx.principal.userId, params.key_id);
      // Another user's key and a missing key are the same 404.
      if (record?.kind !== "gateway") throw new ServiceError("NOT_FOUND", "API key not found");
      await ctx.deps.keys.revoke(record, nowIso());
      emitUserEvent(ctx.deps, ctx.principal.userId, "key.revoked", { keyId: record.id, kind: "gateway" });
      await recordAudit(ctx, { action: "key.revoked", target: record.id, changes: { kind: "gateway" } });
      return { success: true, id: record.id };
    },
  }),

  keysDomain.method({
    name: "auth.keys.update",
    summary:
      "Rename one of the caller's gateway keys or change its allow-lists (allowedModels, allowedTools: glob patterns; null allows everything).",
    input: v.pipe(
      v.object({
        key_id: v.pipe(v.string(), v.minLength(1)),
        name: v.optional(v.pipe(v.string("name must be a string"), v.trim(), v.minLength(1, "name is required"), v.maxLength(100))),
        description: v.optional(v.pipe(v.string("description must be a string"), v.maxLength(500))),
        ...AllowListFields,
      }),
      v.check(
        (input) => ["name", "description", "allowedModels", "allowedTools"].some((field) => field in input),
        "Provide at least one of name, description, allowedModels, allowedTools",
      ),
    ),
    auth: KEYS_NEED_A_SESSION_OR_CONSOLE,
    output: GatewayKeyView,
    errors: { NOT_FOUND: {}, VALIDATION_FAILED: {} },
    http: [
      { surface: "gateway", method: "PATCH", path: "/auth/keys/:key_id" },
      { surface: "console", method: "PATCH", path: "/gateway-keys/:key_id" },
    ],
    async handler(params, ctx) {
      const record = await ctx.deps.keys.get(ctx.principal.userId, params.key_id);
      // Another user's key and a missing key are the same 404.
      if (record?.kind !== "gateway") throw new ServiceError("NOT_FOUND", "API key not found");
      const next = withAllowLists({ ...record }, params);
      if (params.name !== undefined) next.name = params.name;
      if (params.description !== undefined) next.description = params.description;
      await ctx.deps.keys.update(next);
      await recordAudit(ctx, {
        action: "key.updated",
        target: record.id,
        changes: { kind: "gateway", ...changedFields(params, ["key_id"]) },
      });
      return view(next, ctx.deps.keyPrefixes);
    },
  }),
];
