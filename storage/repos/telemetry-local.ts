import { Collection, type RecordStore } from "../collection.js";
import {
  type DIMENSIONS,
  dayOf,
  decodeCursor,
  encodeCursor,
  hourOf,
  statsOf,
  type ListQuery,
  type Summary,
  type SummaryQuery,
  type SummaryRow,
  type TelemetryEvent,
  type TelemetryStore,
} from "./telemetry-model.js";

/**
 * Telemetry on memory and fs (one process): events in one item per tenant and UTC hour
 * (`telemetry:<tenant>:<hour>`, listed by tenant: storage/layout.ts), so a query reads only the
 * hours it covers, found in the tenant's index. Appends to an hour are serialized per item.
 */
export class LocalTelemetry implements TelemetryStore {
  readonly #hoursOf: Collection<TelemetryEvent[]>;
  readonly #locks = new Map<string, Promise<unknown>>();
  readonly #retentionMs: number;
  readonly #pruned = new Map<string, number>();

  constructor(store: RecordStore, retentionDays: number) {
    this.#hoursOf = new Collection<TelemetryEvent[]>(store, "telemetry");
    this.#retentionMs = retentionDays * 86_400_000;
  }

  #hour(hour: number) {
    return String(hour).padStart(7, "0");
  }

  async ingest(tenantId: string, events: readonly TelemetryEvent[]) {
    const byHour = new Map<number, TelemetryEvent[]>();
    for (const event of events) {
      const hour = hourOf(Date.parse(event.timestamp));
      byHour.set(hour, [...(byHour.get(hour) ?? []), event]);
    }
    await Promise.all(
      [...byHour].map(([hour, added]) =>
        this.#locked(`${tenantId}:${this.#hour(hour)}`, async () => {
          const existing = (await this.#hoursOf.get(tenantId, this.#hour(hour))) ?? [];
          await this.#hoursOf.put([tenantId, this.#hour(hour)], [...existing, ...added]);
        }),
      ),
    );
    // Retention: whole hours past TELEMETRY_RETENTION_DAYS go, at most once a minute per tenant.
    if (Date.now() - (this.#pruned.get(tenantId) ?? 0) > 60_000) {
      this.#pruned.set(tenantId, Date.now());
      await this.prune(tenantId, Date.now() - this.#retentionMs);
    }
  }

  /** The tenant's hours from `since` to `until` (exclusive), as [tenant, hour] key parts. */
  async #hours(tenantId: string, since: number, until: number): Promise<[string, string][]> {
    if (!Collection.validId(tenantId)) return [];
    const hours = await this.#hoursOf.ids([tenantId], { from: this.#hour(hourOf(since)), below: this.#hour(hourOf(until - 1) + 1) });
    return hours.map((hour) => [tenantId, hour]);
  }

  async #events([tenantId, hour]: [string, string]): Promise<TelemetryEvent[]> {
    const events = (await this.#hoursOf.get(tenantId, hour)) ?? [];
    return events.map((event) => ({ ...event, ts: Date.parse(event.timestamp) })).sort((a, b) => a.ts - b.ts || a.id.localeCompare(b.id));
  }

  async list(tenantId: string, query: ListQuery) {
    const after = query.cursor ? decodeCursor(query.cursor) : undefined;
    const out: TelemetryEvent[] = [];
    for (const key of await this.#hours(tenantId, query.since, query.until)) {
      for (const event of (await this.#events(key)) as (TelemetryEvent & { ts: number })[]) {
        if (event.ts < query.since || event.ts >= query.until) continue;
        if (after && (event.ts < after.ts || (event.ts === after.ts && event.id <= after.id))) continue;
        if (query.name && event.name !== query.name) continue;
        if (query.component && event.component !== query.component) continue;
        const { ts: _ts, ...plain } = event;
        out.push(plain);
        if (out.length === query.limit) return { events: out, cursor: encodeCursor(event.ts, event.id) };
      }
    }
    return { events: out, cursor: null };
  }

  async summary(tenantId: string, query: SummaryQuery): Promise<Summary> {
    const total = new Row();
    const groups = new Map<string, Row>();
    for (const key of await this.#hours(tenantId, query.since, query.until)) {
      for (const event of (await this.#events(key)) as (TelemetryEvent & { ts: number })[]) {
        if (event.ts < query.since || event.ts >= query.until) continue;
        const metric = query.metric === undefined ? undefined : event.attributes[query.metric];
        const value = typeof metric === "number" ? metric : undefined;
        total.add(event.clientId, value);
        const group = query.groupBy === "day" ? dayOf(event.ts) : event[query.groupBy as (typeof DIMENSIONS)[number]];
        let row = groups.get(group);
        if (!row) groups.set(group, (row = new Row()));
        row.add(event.clientId, value);
      }
    }
    const withMetric = query.metric !== undefined;
    return {
      total: total.view(withMetric),
      groups: [...groups].map(([key, row]) => ({ key, ...row.view(withMetric) })),
    };
  }

  async prune(tenantId: string, before: number) {
    if (!Collection.validId(tenantId)) return;
    for (const hour of await this.#hoursOf.ids([tenantId], { below: this.#hour(hourOf(before)) })) {
      await this.#locked(`${tenantId}:${hour}`, () => this.#hoursOf.remove(tenantId, hour));
    }
  }

  #locked<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(key) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const settled = run.catch(() => undefined);
    this.#locks.set(key, settled);
    void settled.then(() => {
      if (this.#locks.get(key) === settled) this.#locks.delete(key);
    });
    return run;
  }
}

class Row {
  count = 0;
  readonly clients = new Set<string>();
  readonly values: number[] = [];

  add(clientId: string, value: number | undefined) {
    this.count += 1;
    this.clients.add(clientId);
    if (value !== undefined) this.values.push(value);
  }

  view(withMetric: boolean): SummaryRow {
    return {
      count: this.count,
      clients: this.clients.size,
      ...(withMetric ? { metric: statsOf([...this.values].sort((a, b) => a - b)) } : {}),
    };
  }
}
