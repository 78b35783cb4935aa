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

function view(record: KeyRecord, prefixes: KeyPrefixes) {
  return {
    id: record.id,
    name: record.name,
    description: record.description ?? "",
    prefix: keyLabel(prefixes, record),
    createdAt: record.createdAt,
    lastUsedAt: record.lastUsedAt,
    expiresAt: record.expiresAt,
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
      });
      emitUserEvent(ctx.deps, userId, "key.created", { keyId: record.id, kind: "gateway", name: record.name });
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
      return { success: true, id: record.id };
    },
  }),
];
