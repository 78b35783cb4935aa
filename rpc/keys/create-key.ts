import { generateKey, keyHint } from "../credentials/api-keys.js";
import type { KeyKind, KeyRecord } from "../../storage/repos/keys.js";
import { newId, nowIso, sha256Hex } from "../../storage/ids.js";
import type { KeysDeps } from "./deps.js";

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
}

/** Creates a key of any kind; the plaintext is returned here and stored nowhere. */
export async function createKey(deps: Pick<KeysDeps, "keys" | "keyPrefixes">, input: NewKey): Promise<{ record: KeyRecord; secret: string }> {
  const secret = generateKey(deps.keyPrefixes, input.kind);
  const record = await deps.keys.create({
    id: newId("key"),
    kind: input.kind,
    owner: input.owner,
    userId: input.userId,
    name: input.name,
    description: input.description,
    hash: sha256Hex(secret),
    hint: keyHint(deps.keyPrefixes, input.kind, secret),
    scopes: input.scopes,
    createdAt: nowIso(),
    expiresAt: input.expiresAt ?? null,
    lastUsedAt: null,
    revokedAt: null,
    spendLimit: input.spendLimit ?? null,
    rpmLimit: input.rpmLimit ?? null,
    tpmLimit: input.tpmLimit ?? null,
  });
  return { record, secret };
}
