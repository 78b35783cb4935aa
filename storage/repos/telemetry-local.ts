import type { Storage } from "unstorage";
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
 * Telemetry on memory and fs (one process): events in one item per tenant and UTC hour, so a
 * query reads only the hours it covers. Appends to an hour are serialized per item.
 */
export class LocalTelemetry implements TelemetryStore {
  readonly #kv: Storage;
  readonly #locks = new Map<string, Promise<unknown>>();
  readonly #retentionMs: number;
  readonly #pruned = new Map<string, number>();

  constructor(kv: Storage, retentionDays: number) {
    this.#kv = kv;
    this.#retentionMs = retentionDays * 86_400_000;
  }

  #key(tenantId: string, hour: number) {
    return `telemetry:${tenantId}:${String(hour).padStart(7, "0")}`;
  }

  async ingest(tenantId: string, events: readonly TelemetryEvent[]) {
    const byHour = new Map<number, TelemetryEvent[]>();
    for (const event of events) {
      const hour = hourOf(Date.parse(event.timestamp));
      byHour.set(hour, [...(byHour.get(hour) ?? []), event]);
    }
    await Promise.all(
      [...byHour].map(([hour, added]) =>
        this.#locked(this.#key(tenantId, hour), async (key) => {
          const existing = ((await this.#kv.getItem(key)) as TelemetryEvent[] | null) ?? [];
          await this.#kv.setItem(key, [...existing, ...added] as never);
        }),
      ),
    );
    // Retention: whole hours past TELEMETRY_RETENTION_DAYS go, at most once a minute per tenant.
    if (Date.now() - (this.#pruned.get(tenantId) ?? 0) > 60_000) {
      this.#pruned.set(tenantId, Date.now());
      await this.prune(tenantId, Date.now() - this.#retentionMs);
    }
  }

  async #hours(tenantId: string, since: number, until: number): Promise<string[]> {
    const base = `telemetry:${tenantId}`;
    const first = this.#key(tenantId, hourOf(since));
    const last = this.#key(tenantId, hourOf(until - 1));
    return (await this.#kv.getKeys(base)).filter((key) => key.startsWith(`${base}:`) && key >= first && key <= last).sort();
  }

  async #events(key: string): Promise<TelemetryEvent[]> {
    const events = ((await this.#kv.getItem(key)) as TelemetryEvent[] | null) ?? [];
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
    const base = `telemetry:${tenantId}`;
    const cutoff = this.#key(tenantId, hourOf(before));
    for (const key of await this.#kv.getKeys(base)) {
      if (key.startsWith(`${base}:`) && key < cutoff) await this.#locked(key, (k) => this.#kv.removeItem(k));
    }
  }

  #locked<T>(key: string, fn: (key: string) => Promise<T>): Promise<T> {
    const previous = this.#locks.get(key) ?? Promise.resolve();
    const run = previous.then(
      () => fn(key),
      () => fn(key),
    );
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
