import type { Redis } from "ioredis";
import {
  DIMENSIONS, HOUR_MS, dayOf, decodeCursor, encodeCursor, hourOf, bucketOf, statsOfHistogram,
  type ListQuery, type Summary, type SummaryQuery, type SummaryRow, type TelemetryEvent, type TelemetryStore,
} from "./telemetry-model.js";

const SEP = "\u001f";
const ALL = "*";
/** Events read per round trip while filtering a list page; a page scans at most 10 of these. */
const SCAN_CHUNK = 1_000;
const PRUNE_EVERY_MS = 60_000;
const pad = (ts: number) => String(ts).padStart(13, "0");

/**
 * Telemetry on Redis (docs/telemetry.md). Events: one sorted set per tenant, members
 * `<ms>|<id>|<json>` at score 0, so lexicographic ranges are time ranges. Summaries: per tenant
 * and UTC hour, a hash of counts per name/component/version, HyperLogLogs of client ids, and per
 * numeric attribute a histogram of 1 %-wide buckets plus the exact maximum, all updated in
 * the batch's one MULTI, aggregated in process first, and expiring after the retention.
 */
export class RedisTelemetry implements TelemetryStore {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #retentionMs: number;
  readonly #pruned = new Map<string, number>();

  constructor(redis: Redis, prefix: string, retentionDays: number) {
    this.#redis = redis;
    this.#prefix = `${prefix}:tm:`;
    this.#retentionMs = retentionDays * 86_400_000;
  }

  #t(tenantId: string) {
    return this.#prefix + tenantId;
  }

  async ingest(tenantId: string, events: readonly TelemetryEvent[]) {
    if (events.length === 0) return;
    const t = this.#t(tenantId);
    const counts = new Map<string, Map<string, number>>();
    const clients = new Map<string, Set<string>>();
    const histograms = new Map<string, Map<string, number>>();
    const maxima = new Map<string, Map<string, number>>();
    const expiries = new Map<string, number>();
    const bump = <K>(map: Map<string, Map<K, number>>, key: string, field: K, by = 1) => {
      let inner = map.get(key);
      if (!inner) map.set(key, (inner = new Map()));
      inner.set(field, (inner.get(field) ?? 0) + by);
    };
    const members: string[] = [];
    for (const event of events) {
      const ts = Date.parse(event.timestamp);
      const hour = hourOf(ts);
      const h = `${t}:h:${hour}`;
      const expireAt = (hour + 1) * HOUR_MS + this.#retentionMs;
      members.push(0 as never, `${pad(ts)}|${event.id}|${JSON.stringify(event)}`);
      const groups = [ALL, ...DIMENSIONS.map((dim) => `${dim}${SEP}${event[dim]}`)];
      for (const group of groups) {
        bump(counts, `${h}:c`, group);
        const hll = `${h}:u:${group === ALL ? ALL : group.replace(SEP, ":")}`;
        let set = clients.get(hll);
        if (!set) clients.set(hll, (set = new Set()));
        set.add(event.clientId);
        expiries.set(hll, expireAt);
      }
      expiries.set(`${h}:c`, expireAt);
      for (const [attr, value] of Object.entries(event.attributes)) {
        if (typeof value !== "number" || !Number.isFinite(value)) continue;
        const bucket = bucketOf(value);
        for (const group of groups) {
          bump(histograms, `${h}:m:${attr}`, `${group}${SEP}${bucket}`);
          const current = maxima.get(`${h}:x:${attr}`)?.get(group);
          if (current === undefined || value > current) {
            let inner = maxima.get(`${h}:x:${attr}`);
            if (!inner) maxima.set(`${h}:x:${attr}`, (inner = new Map()));
            inner.set(group, value);
          }
        }
        expiries.set(`${h}:m:${attr}`, expireAt);
        expiries.set(`${h}:x:${attr}`, expireAt);
      }
    }
    const multi = this.#redis.multi();
    multi.zadd(`${t}:ev`, ...(members as unknown as [number, string]));
    for (const [key, fields] of counts) for (const [field, by] of fields) multi.hincrby(key, field, by);
    for (const [key, set] of clients) multi.pfadd(key, ...set);
    for (const [key, fields] of histograms) for (const [field, by] of fields) multi.hincrby(key, field, by);
    for (const [key, fields] of maxima) for (const [member, value] of fields) multi.zadd(key, "GT", value, member);
    for (const [key, at] of expiries) multi.pexpireat(key, at);
    await multi.exec();
    const last = this.#pruned.get(tenantId) ?? 0;
    if (Date.now() - last > PRUNE_EVERY_MS) {
      this.#pruned.set(tenantId, Date.now());
      await this.prune(tenantId, Date.now() - this.#retentionMs);
    }
  }

  async list(tenantId: string, query: ListQuery) {
    const key = `${this.#t(tenantId)}:ev`;
    const after = query.cursor ? decodeCursor(query.cursor) : undefined;
    let min = after && after.ts >= query.since ? `(${pad(after.ts)}|${after.id}|~` : `[${pad(query.since)}`;
    const max = `(${pad(query.until)}`;
    const out: TelemetryEvent[] = [];
    for (let round = 0; round < 10; round += 1) {
      const chunk = await this.#redis.zrangebylex(key, min, max, "LIMIT", 0, SCAN_CHUNK);
      for (const member of chunk) {
        const event = parseMember(member);
        if ((query.name && event.name !== query.name) || (query.component && event.component !== query.component)) continue;
        out.push(event);
        if (out.length === query.limit) return { events: out, cursor: encodeCursor(Date.parse(event.timestamp), event.id) };
      }
      if (chunk.length < SCAN_CHUNK) return { events: out, cursor: null };
      const lastMember = chunk[chunk.length - 1]!;
      const [ts, id] = lastMember.split("|", 2);
      min = `(${ts}|${id}|~`;
    }
    // Scanned enough for one request: the caller continues from here.
    const [ts, id] = min.slice(1).split("|", 2);
    return { events: out, cursor: encodeCursor(Number(ts), id!) };
  }

  async summary(tenantId: string, query: SummaryQuery): Promise<Summary> {
    const t = this.#t(tenantId);
    const hours: number[] = [];
    for (let hour = hourOf(query.since); hour < hourOf(query.until); hour += 1) hours.push(hour);
    const read = this.#redis.pipeline();
    for (const hour of hours) read.hgetall(`${t}:h:${hour}:c`);
    if (query.metric !== undefined) {
      for (const hour of hours) {
        read.hgetall(`${t}:h:${hour}:m:${query.metric}`);
        read.zrange(`${t}:h:${hour}:x:${query.metric}`, 0, -1, "WITHSCORES");
      }
    }
    const results = ((await read.exec()) ?? []).map(([error, value]) => {
      if (error) throw error;
      return value;
    });
    const countsOf = results.slice(0, hours.length) as Record<string, string>[];
    const metricOf = (i: number) => (query.metric === undefined ? undefined : { hist: results[hours.length + 2 * i] as Record<string, string>, max: results[hours.length + 2 * i + 1] as string[] });

    // group key → counts, HLL keys, histogram and max
    interface Acc { count: number; hlls: string[]; hist: Map<string, number>; max: number | null }
    const acc = new Map<string, Acc>();
    const total: Acc = { count: 0, hlls: [], hist: new Map(), max: null };
    const into = (target: Acc, count: number, hll: string, metric: ReturnType<typeof metricOf>, group: string) => {
      target.count += count;
      target.hlls.push(hll);
      if (!metric) return;
      for (const [field, n] of Object.entries(metric.hist ?? {})) {
        const cut = field.lastIndexOf(SEP);
        if (field.slice(0, cut) !== group) continue;
        const bucket = field.slice(cut + 1);
        target.hist.set(bucket, (target.hist.get(bucket) ?? 0) + Number(n));
      }
      for (let i = 0; i + 1 < (metric.max ?? []).length; i += 2) {
        if (metric.max[i] !== group) continue;
        const value = Number(metric.max[i + 1]);
        if (target.max === null || value > target.max) target.max = value;
      }
    };
    hours.forEach((hour, i) => {
      const counts = countsOf[i] ?? {};
      const all = Number(counts[ALL] ?? 0);
      if (!all) return;
      const h = `${t}:h:${hour}`;
      const metric = metricOf(i);
      into(total, all, `${h}:u:${ALL}`, metric, ALL);
      if (query.groupBy === "day") {
        const day = dayOf(hour * HOUR_MS);
        if (!acc.has(day)) acc.set(day, { count: 0, hlls: [], hist: new Map(), max: null });
        into(acc.get(day)!, all, `${h}:u:${ALL}`, metric, ALL);
        return;
      }
      for (const [field, n] of Object.entries(counts)) {
        if (!field.startsWith(query.groupBy + SEP)) continue;
        const value = field.slice(query.groupBy.length + 1);
        if (!acc.has(value)) acc.set(value, { count: 0, hlls: [], hist: new Map(), max: null });
        into(acc.get(value)!, Number(n), `${h}:u:${query.groupBy}:${value}`, metric, field);
      }
    });
    const rows = [["", total] as const, ...acc];
    const distinct = this.#redis.pipeline();
    for (const [, row] of rows) distinct.pfcount(row.hlls.length ? row.hlls : [`${t}:none`]);
    const counted = ((await distinct.exec()) ?? []).map(([error, value]) => {
      if (error) throw error;
      return Number(value);
    });
    const view = (row: Acc, clients: number): SummaryRow => ({
      count: row.count,
      clients: row.count ? clients : 0,
      ...(query.metric !== undefined ? { metric: statsOfHistogram(row.hist, row.max) } : {}),
    });
    return {
      total: view(total, counted[0]!),
      groups: [...acc].map(([key, row], i) => ({ key, ...view(row, counted[i + 1]!) })),
    };
  }

  async prune(tenantId: string, before: number) {
    await this.#redis.zremrangebylex(`${this.#t(tenantId)}:ev`, "-", `(${pad(before)}`);
  }
}

function parseMember(member: string): TelemetryEvent {
  const first = member.indexOf("|");
  const second = member.indexOf("|", first + 1);
  return JSON.parse(member.slice(second + 1)) as TelemetryEvent;
}
