import { randomBytes } from "node:crypto";
import { Collection } from "../collection.js";
import type { Store } from "../store.js";

/** One change to access, money or configuration (docs/audit.md); never rewritten once stored. */
export interface AuditRecord {
  id: string;
  tenantId: string;
  /** ISO time of the change. */
  at: string;
  /** Who: the user (and the key they used), or the service credential. */
  actor: { kind: string; userId: string | null; keyId: string | null };
  /** `<object>.<verb>`, e.g. `key.created`, `member.role_changed`. */
  action: string;
  /** The id of what changed. */
  target: string;
  requestId: string;
  /** What changed, redacted: never a secret (rpc/audit.ts). */
  changes: Record<string, unknown>;
}

/**
 * Ids sort newest first: the inverted time, then an inverted sequence of this process (so
 * records written in the same millisecond list in reverse write order), then randomness
 * against ties between instances.
 */
const LATEST = 9_999_999_999_999;
const SEQUENCE_SPAN = 0xffffffff;
let sequence = 0;

function auditId(at: number): string {
  sequence = (sequence + 1) % SEQUENCE_SPAN;
  const inverted = (SEQUENCE_SPAN - sequence).toString(16).padStart(8, "0");
  return `${String(LATEST - at).padStart(13, "0")}${inverted}${randomBytes(4).toString("hex")}`;
}

/**
 * The audit log: `audit:<tenantId>:<id>`, listed per tenant (storage/layout.ts) with ids that
 * sort newest first, so a page is one index range read and never a keyspace scan.
 */
export class AuditRepo {
  readonly #records: Collection<AuditRecord>;

  constructor(store: Store) {
    this.#records = new Collection<AuditRecord>(store, "audit");
  }

  /** Appends a record (its id is made here, from its time). */
  async append(record: Omit<AuditRecord, "id">): Promise<AuditRecord> {
    const stored = { ...record, id: auditId(Date.parse(record.at)) };
    await this.#records.put([record.tenantId, stored.id], stored);
    return stored;
  }

  /** A page of a tenant's records, newest first, after the id `after` (the previous page's cursor). */
  async page(tenantId: string, options: { after?: string; limit: number }): Promise<{ records: AuditRecord[]; more: boolean }> {
    if (!Collection.validId(tenantId)) return { records: [], more: false };
    const records = await this.#records.range([tenantId], {
      ...(options.after !== undefined ? { after: options.after } : {}),
      limit: options.limit + 1,
    });
    return { records: records.slice(0, options.limit), more: records.length > options.limit };
  }
}
