import { createHash } from "node:crypto";
import { Collection } from "../collection.js";
import type { Store } from "../store.js";

/** What one rollup groups by: a day and the request's workspace, key, model, surface and agent. */
export interface UsageDims {
  /** YYYY-MM-DD (UTC) */
  day: string;
  surface: string;
  model: string;
  workspaceId?: string;
  keyId?: string;
  agentId?: string;
}

export const USAGE_FIELDS = ["requests", "inputTokens", "outputTokens", "credits", "agentRuns"] as const;
export type UsageField = (typeof USAGE_FIELDS)[number];
export type UsageCounts = Record<UsageField, number>;

/** Ids of recent dimension sets: a busy key's requests share one, hashed once. */
const rollupIds = new Map<string, string>();

/** The rollup id of a set of dimensions (the day apart): a hash of them. */
function rollupId(dims: UsageDims): string {
  const name = JSON.stringify([dims.surface, dims.model, dims.workspaceId ?? "", dims.keyId ?? "", dims.agentId ?? ""]);
  let id = rollupIds.get(name);
  if (id === undefined) {
    id = createHash("sha256").update(name).digest("hex").slice(0, 20);
    if (rollupIds.size >= 10_000) rollupIds.clear();
    rollupIds.set(name, id);
  }
  return id;
}

/**
 * The gateway's own metering (docs/billing.md "Usage"): per tenant, per day, one rollup per
 * combination of dimensions. The dimensions are a JSON record under
 * `usage-rollups:<tenant>:<day>:<id>`; each count is an atomic counter
 * `usage:<tenant>:<day>:<id>:<field>` (a request's counts added in one step: one script on
 * Redis), so concurrent requests on any number of instances never lose a count. A tenant's
 * rollups are listed from its index (storage/layout.ts), a range of days at a time.
 */
export class UsageRepo {
  readonly #rollups: Collection<UsageDims>;
  readonly #atomic: Store["atomic"];
  /** Rollups known to exist (`tenant:day:id`). */
  readonly #known = new Set<string>();

  constructor(store: Store) {
    this.#atomic = store.atomic;
    this.#rollups = new Collection<UsageDims>(store, "usage-rollups");
  }

  #counter(tenantId: string, day: string, id: string, field: UsageField) {
    return `usage:${tenantId}:${day}:${id}:${field}`;
  }

  /**
   * Counts one request. The rollup's record is written first when it is new: a counter is never
   * without the record that names it; one written (or seen) once is remembered, so a busy
   * rollup costs no read per request. The counters in one step (one script on Redis, one
   * journal flush on fs).
   */
  async record(tenantId: string, dims: UsageDims, counts: Partial<UsageCounts>): Promise<void> {
    if (!Collection.validId(tenantId)) return;
    const id = rollupId(dims);
    const rollup = `${tenantId}:${dims.day}:${id}`;
    if (!this.#known.has(rollup)) {
      if (!(await this.#rollups.get(tenantId, dims.day, id))) await this.#rollups.put([tenantId, dims.day, id], dims);
      if (this.#known.size >= 10_000) this.#known.clear();
      this.#known.add(rollup);
    }
    await this.#atomic.addAll(this.#deltas(tenantId, dims.day, id, counts));
  }

  /**
   * The counter increments of one request for a caller that adds them in a step of its own (the
   * ledger's settlement carries them: rpc/money/metering.ts), when its rollup is known to exist
   * here; undefined otherwise (`record` then writes the rollup first).
   */
  knownCounters(tenantId: string, dims: UsageDims, counts: Partial<UsageCounts>): [key: string, delta: number][] | undefined {
    if (!Collection.validId(tenantId)) return [];
    const id = rollupId(dims);
    return this.#known.has(`${tenantId}:${dims.day}:${id}`) ? this.#deltas(tenantId, dims.day, id, counts) : undefined;
  }

  #deltas(tenantId: string, day: string, id: string, counts: Partial<UsageCounts>): [key: string, delta: number][] {
    return USAGE_FIELDS.filter((field) => counts[field]).map((field) => [this.#counter(tenantId, day, id, field), counts[field]!]);
  }

  /** Every rollup of the tenant from `from` to `to` (days, inclusive), with its counts. */
  async rows(tenantId: string, from: string, to: string): Promise<(UsageDims & UsageCounts)[]> {
    if (!Collection.validId(tenantId)) return [];
    // The tenant's index holds `<day>:<id>`: the days asked for are one range of it (";" sorts right after ":").
    const ids = await this.#rollups.ids([tenantId], { from, below: `${to};` });
    if (!ids.length) return [];
    const rollups = await this.#rollups.getMany(ids.map((id) => this.#rollups.key(tenantId, ...id.split(":"))));
    return Promise.all(
      rollups.map(async (dims) => {
        const id = rollupId(dims);
        const counts = {} as UsageCounts;
        for (const field of USAGE_FIELDS) counts[field] = await this.#atomic.balance(this.#counter(tenantId, dims.day, id, field));
        return { ...dims, ...counts };
      }),
    );
  }
}
