import { generateKey } from "../credentials/api-keys.js";
import type { KeyKind, KeyRecord } from "../../storage/repos/keys.js";
import { newId, nowIso, sha256Hex } from "../../storage/ids.js";
import type { KeysDeps } from "./deps.js";
import { tenantsOf } from "../tenants/access.js";
import { createWithinQuota } from "../quotas.js";

export interface NewKey {
  kind: KeyKind;
  /** User id (gateway, account) or workspace id (platform). */
  owner: string;
  userId: string;
  name: string;
  description?: string;
  scopes: string[];
  expiresAt?: string | null;
  spendLimit?: number | null;
  rpmLimit?: number | null;
  tpmLimit?: number | null;
  /** Allow-lists (docs/access-control.md); absent: any model, any tool. */
  allowedModels?: string[] | null;
  allowedTools?: string[] | null;
}

/**
 * Creates a key of any kind for the signed-in user `input.userId` unless they already have
 * QUOTA_KEYS_PER_USER live keys (409, docs/quotas.md): counted and created under the user's
 * quota lock, so concurrent creates on any instance never pass it.
 */
export function createKeyWithinQuota(deps: KeysDeps, input: NewKey): Promise<{ record: KeyRecord; secret: string }> {
  return withinKeyQuota(deps, input.userId, () => createKey(deps, input));
}

/** Runs `create` (one more key of `userId`, of any kind) under the user's key quota. */
export function withinKeyQuota<T>(deps: KeysDeps, userId: string, create: () => Promise<T>): Promise<T> {
  return createWithinQuota(deps, "keys_per_user", userId, () => liveKeysOf(deps, userId), create);
}

/**
 * The live (unrevoked, unexpired) keys a user created, of every kind: their gateway and
 * personal keys, and the platform keys they made in the workspaces of the tenants they are a
 * member of (a key left behind in a tenant they left is that tenant's to revoke, and no
 * longer counts for them).
 */
export async function liveKeysOf(deps: KeysDeps, userId: string): Promise<number> {
  const now = Date.now();
  const live = (record: KeyRecord) => !record.expiresAt || Date.parse(record.expiresAt) > now;
  const own = (await deps.keys.list(userId)).filter(live).length;
  const user = await deps.users.get(userId);
  if (!user) return own;
  const tenants = await tenantsOf(deps, { kind: "session", userId, scopes: [] });
  const workspaces = await Promise.all(
    tenants.map(({ tenant }) => deps.tenants.workspacesOf(tenant.id, user.tenantId === tenant.id ? [user.workspaceId] : [])),
  );
  const platform = await Promise.all(workspaces.flat().map((workspace) => deps.keys.list(workspace.id, "platform")));
  return own + platform.flat().filter((record) => record.userId === userId && live(record)).length;
}

/**
 * Creates a key of any kind; the plaintext is returned here and stored nowhere: the record
 * keeps its hash and its public id (rpc/credentials/api-keys.ts), no part of the secret.
 */
export async function createKey(
  deps: Pick<KeysDeps, "keys" | "keyPrefixes">,
  input: NewKey,
): Promise<{ record: KeyRecord; secret: string }> {
  const { secret, publicId } = generateKey(deps.keyPrefixes, input.kind);
  const record = await deps.keys.create({
    id: newId("key"),
    kind: input.kind,
    owner: input.owner,
    userId: input.userId,
    name: input.name,
    description: input.description,
    hash: sha256Hex(secret),
    publicId,
    scopes: input.scopes,
    createdAt: nowIso(),
    expiresAt: input.expiresAt ?? null,
    lastUsedAt: null,
    revokedAt: null,
    spendLimit: input.spendLimit ?? null,
    rpmLimit: input.rpmLimit ?? null,
    tpmLimit: input.tpmLimit ?? null,
    ...(input.allowedModels ? { allowedModels: input.allowedModels } : {}),
    ...(input.allowedTools ? { allowedTools: input.allowedTools } : {}),
  });
  return { record, secret };
}
