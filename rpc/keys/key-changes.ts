import type { KeyRecord } from "../../storage/repos/keys.js";

/** A new key as its audit record shows it (docs/audit.md): its settings, never its secret, hash or hint. */
export function keyChanges(record: KeyRecord): Record<string, unknown> {
  return {
    name: record.name,
    scopes: record.scopes,
    expiresAt: record.expiresAt,
    spendLimit: record.spendLimit,
    rpmLimit: record.rpmLimit,
    tpmLimit: record.tpmLimit,
    allowedModels: record.allowedModels ?? null,
    allowedTools: record.allowedTools ?? null,
  };
}
