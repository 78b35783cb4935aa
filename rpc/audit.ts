import type { Principal } from "./auth.js";
import type { Repos } from "./repos.js";
import { tenantIdOf } from "./allow-list.js";
import { nowIso } from "../storage/ids.js";
import { maskUrlPasswords } from "../storage/mask.js";

/**
 * The audit log (docs/audit.md): every method that changes access, money or configuration
 * appends who did what to which object, in which tenant and request, with a summary of the
 * change that never holds a secret.
 */
export type AuditDeps = Pick<Repos, "audit" | "users" | "tenants">;

export interface AuditEntry {
  /** `<object>.<verb>`, e.g. `key.created`. */
  action: string;
  /** The id of what changed. */
  target: string;
  /** What changed; redacted here before it is stored. */
  changes?: Record<string, unknown>;
  /** The tenant the change belongs to; default: the caller's (rpc/allow-list.ts `tenantIdOf`). */
  tenantId?: string;
}

/** Field names whose values are secrets: their values are never stored, only that they changed. */
const SECRET_FIELD = /secret|token|password|passphrase|authorization|cookie|credential|api_?key|^key$|^hash$|^headers$/i;

/** `value` with every secret-named field replaced by "[redacted]" and passwords in URLs masked. */
export function redacted(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return maskUrlPasswords(value.length > 500 ? `${value.slice(0, 500)}…` : value);
  if (depth > 4 || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.slice(0, 100).map((item) => redacted(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [field, inner] of Object.entries(value)) {
    out[field] = SECRET_FIELD.test(field) && inner !== null && inner !== undefined ? "[redacted]" : redacted(inner, depth + 1);
  }
  return out;
}

/** The fields a change sent (a method's params), without the ones that only name the target. */
export function changedFields(params: object, omit: readonly string[] = []): Record<string, unknown> {
  return Object.fromEntries(Object.entries(params).filter(([field, value]) => value !== undefined && !omit.includes(field)));
}

/**
 * Where the changes of a caller without a tenant go (the service credential changing the model
 * registry): the operators' log, not a tenant's (tenant ids never take this form).
 */
export const OPERATORS_LOG = "operators";

/**
 * Appends one record for the call `ctx` made, after its change was made. When storage refuses the
 * record the change stands and the caller still gets its answer (failing now would undo nothing
 * and would lose what it shows once, a new key's secret): the record goes whole into the
 * request's log line as `auditUnstored` instead (docs/audit.md "When the record cannot be stored").
 */
export async function recordAudit(
  ctx: { deps: AuditDeps; principal: Principal | undefined; requestId: string; logFields?: Record<string, unknown> },
  entry: AuditEntry,
): Promise<void> {
  const principal = ctx.principal;
  const record = {
    tenantId: entry.tenantId,
    at: nowIso(),
    actor: {
      kind: principal?.kind ?? "anonymous",
      userId: principal && principal.kind !== "service" ? principal.userId : null,
      keyId: principal?.key?.id ?? null,
    },
    action: entry.action,
    target: entry.target,
    requestId: ctx.requestId,
    changes: redacted(entry.changes ?? {}) as Record<string, unknown>,
  };
  try {
    const tenantId = record.tenantId ?? (principal ? await tenantIdOf(ctx.deps, principal) : undefined) ?? OPERATORS_LOG;
    await ctx.deps.audit.append({ ...record, tenantId });
  } catch (error) {
    if (ctx.logFields) {
      ctx.logFields.auditUnstored = record;
      ctx.logFields.auditError = (error as Error).message;
    }
  }
}
