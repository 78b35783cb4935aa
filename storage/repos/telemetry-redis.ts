import type { Redis } from "ioredis";
import {
  HOUR_MS,
  dayOf,
  decodeCursor,
  encodeCursor,
  hourOf,
  bucketOf,
  statsOfHistogram,
  type ListQuery,
  type Summary,
  type SummaryQuery,
  type SummaryRow,
  type TelemetryEvent,
  type TelemetryStore,
} from "./telemetry-model.js";

const ALL = "*";
/** Events read per round trip while filtering a list page; a page scans at most 10 of these. */
const SCAN_CHUNK = 1_000;
const PRUNE_EVERY_MS = 60_000;
const pad = (ts: number) => String(ts).padStart(13, "0");

/**
 * One batch in one script call: the events, then every counter, HyperLogLog, histogram bucket,
 * maximum and expiry the batch touches, aggregated in process first. One command instead of
 * hundreds, applied atomically.
 */
const INGEST = `
local i = 1
local function take() local v = ARGV[i]; i = i + 1; return v end
local ev = take()
local n = tonumber(take())
for s = 1, n, 200 do
  local args = {}
  for j = s, math.min(n, s + 199) do args[#args + 1] = 0; args[#args + 1] = ARGV[i]; i = i + 1 end
  redis.call('ZADD', ev, unpack(args))
end
n = tonumber(take())
for _ = 1, n do local k = take(); local f = take(); redis.call('HINCRBY', k, f, take()) end
n = tonumber(take())
for _ = 1, n do
  local k = take(); local c = tonumber(take())
  local args = {}
  for _ = 1, c do args[#args + 1] = take() end
  redis.call('PFADD', k, unpack(args))
end
n = tonumber(take())
for _ = 1, n do local k = take(); local m = take(); redis.call('ZADD', k, 'GT', take(), m) end
n = tonumber(take())
for _ = 1, n do local k = take(); redis.call('PEXPIREAT', k, take()) end
return 1`;

/**
 * Telemetry on Redis (docs/telemetry.md). Events: one sorted set per tenant, members
 * `<ms>|<id>|<json>` at score 0, so lexicographic ranges are time ranges. Summaries: per tenant
 * and UTC hour, a hash of counts per name/component/version, HyperLogLogs of client ids, and per
 * numeric attribute and group a histogram of 2 %-wide buckets plus the exact maximum, expiring
 * after the retention. A summary reads these hour keys, never the events.
 */
/** One UTC hour of a batch: counts and client ids per group, and per numeric attribute its histogram buckets and maximum per group. */
interface HourAggregate {
  counts: Map<string, number>;
  clients: Map<string, Set<string>>;
  histograms: Map<string, Map<string, Map<string, number>>>;
  maxima: Map<string, Map<string, number>>;
}

export class RedisTelemetry implements TelemetryStore {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #retentionMs: number;
  readonly #pruned = new Map<string, number>();

  constructor(redis: Redis, prefix: string, retentionDays: number) {
    this.#redis = redis;
    this.#prefix = `${prefix}:tm:`;
    this.#retentionMs = retentionDays * 86_400_000;
    redis.defineCommand("telemetryIngest", { numberOfKeys: 0, lua: INGEST });
  }

  #t(tenantId: string) {
    return this.#prefix + tenantId;
  }

  async ingest(tenantId: string, events: readonly TelemetryEvent[]) {
    if (events.length === 0) return;
    const t = this.#t(tenantId);
    // Aggregated in nested maps per UTC hour, so the key strings are built once per hour and
    // group when the arguments are written, not once per event (the ingest profile's top cost).
    const hours = new Map<number, HourAggregate>();
    const members: string[] = [];
    for (const event of events) {
      const ts = Date.parse(event.timestamp);
      const hour = hourOf(ts);
      let agg = hours.get(hour);
      if (!agg) hours.set(hour, (agg = { counts: new Map(), clients: new Map(), histograms: new Map(), maxima: new Map() }));
      members.push(`${pad(ts)}|${event.id}|${JSON.stringify(event)}`);
      const groups = [ALL, `name:${event.name}`, `component:${event.component}`, `version:${event.version}`];
      for (const group of groups) {
        agg.counts.set(group, (agg.counts.get(group) ?? 0) + 1);
        let set = agg.clients.get(group);
        if (!set) agg.clients.set(group, (set = new Set()));
        set.add(event.clientId);
      }
      for (const attr in event.attributes) {
        const value = event.attributes[attr];
        if (typeof value !== "number" || !Number.isFinite(value)) continue;
        const bucket = bucketOf(value);
        let byGroup = agg.histograms.get(attr);
        if (!byGroup) agg.histograms.set(attr, (byGroup = new Map()));
        let maxima = agg.maxima.get(attr);
        if (!maxima) agg.maxima.set(attr, (maxima = new Map()));
        for (const group of groups) {
          let buckets = byGroup.get(group);
          if (!buckets) byGroup.set(group, (buckets = new Map()));
          buckets.set(bucket, (buckets.get(bucket) ?? 0) + 1);
          const current = maxima.get(group);
          if (current === undefined || value > current) maxima.set(group, value);
        }
      }
    }
    const counts: (string | number)[] = [];
    const clients: (string | number)[] = [];
    const maxima: (string | number)[] = [];
    const expiries: (string | number)[] = [];
    let countEntries = 0;
    let clientKeys = 0;
    let maximumEntries = 0;
    for (const [hour, agg] of hours) {
      const h = `${t}:h:${hour}`;
      const expireAt = (hour + 1) * HOUR_MS + this.#retentionMs;
      const c = `${h}:c`;
      for (const [group, by] of agg.counts) counts.push(c, group, by);
      countEntries += agg.counts.size;
      expiries.push(c, expireAt);
      for (const [group, set] of agg.clients) {
        const hll = `${h}:u:${group}`;
        clients.push(hll, set.size, ...set);
        expiries.push(hll, expireAt);
      }
      clientKeys += agg.clients.size;
      for (const [attr, byGroup] of agg.histograms) {
        for (const [group, buckets] of byGroup) {
          const histogram = `${h}:m:${attr}:${group}`;
          for (const [bucket, by] of buckets) counts.push(histogram, bucket, by);
          countEntries += buckets.size;
          expiries.push(histogram, expireAt);
        }
        const maxKey = `${h}:x:${attr}`;
        for (const [group, value] of agg.maxima.get(attr)!) maxima.push(maxKey, group, value);
        maximumEntries += agg.maxima.get(attr)!.size;
        expiries.push(maxKey, expireAt);
      }
    }
    const args: (string | number)[] = [
      `${t}:ev`,
      members.length,
      ...members,
      countEntries,
      ...counts,
      clientKeys,
      ...clients,
      maximumEntries,
      ...maxima,
      expiries.length / 2,
      ...expiries,
    ];
    await (this.#redis as unknown as { telemetryIngest(...args: (string | number)[]): Promise<unknown> }).telemetryIngest(...args);
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
      const [ts, id] = chunk[chunk.length - 1]!.split("|", 2);
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
    const counts = (await exec(
      this.#redis,
      hours.map((hour) => ["hgetall", `${t}:h:${hour}:c`]),
    )) as Record<string, string>[];

    interface Acc {
      count: number;
      hlls: string[];
      hist: Map<string, number>;
      max: number | null;
      parts: [hour: number, group: string][];
    }
    const fresh = (): Acc => ({ count: 0, hlls: [], hist: new Map(), max: null, parts: [] });
    const total = fresh();
    const rows = new Map<string, Acc>();
    const add = (row: Acc, hour: number, group: string, count: number) => {
      row.count += count;
      row.hlls.push(`${t}:h:${hour}:u:${group}`);
      row.parts.push([hour, group]);
    };
    hours.forEach((hour, i) => {
      const hourCounts = counts[i] ?? {};
      const all = Number(hourCounts[ALL] ?? 0);
      if (!all) return;
      add(total, hour, ALL, all);
      if (query.groupBy === "day") {
        const day = dayOf(hour * HOUR_MS);
        if (!rows.has(day)) rows.set(day, fresh());
        add(rows.get(day)!, hour, ALL, all);
        return;
      }
      for (const [group, n] of Object.entries(hourCounts)) {
        if (!group.startsWith(`${query.groupBy}:`)) continue;
        const value = group.slice(query.groupBy.length + 1);
        if (!rows.has(value)) rows.set(value, fresh());
        add(rows.get(value)!, hour, group, Number(n));
      }
    });

    const ordered = [total, ...rows.values()];
    const commands: (string | string[])[][] = ordered.map((row) => ["pfcount", row.hlls.length ? row.hlls : [`${t}:none`]]);
    const metric = query.metric;
    if (metric !== undefined) {
      for (const row of ordered)
        for (const [hour, group] of row.parts)
          commands.push(["hgetall", `${t}:h:${hour}:m:${metric}:${group}`], ["zscore", `${t}:h:${hour}:x:${metric}`, group]);
    }
    const replies = await exec(this.#redis, commands);
    let at = ordered.length;
    if (metric !== undefined) {
      for (const row of ordered) {
        for (let p = 0; p < row.parts.length; p += 1) {
          const histogram = replies[at++] as Record<string, string>;
          const max = replies[at++] as string | null;
          for (const [bucket, n] of Object.entries(histogram ?? {})) row.hist.set(bucket, (row.hist.get(bucket) ?? 0) + Number(n));
          if (max !== null && (row.max === null || Number(max) > row.max)) row.max = Number(max);
        }
      }
    }
    const view = (row: Acc, clients: number): SummaryRow => ({
      count: row.count,
      clients: row.count ? clients : 0,
      ...(metric !== undefined ? { metric: statsOfHistogram(row.hist, row.max) } : {}),
    });
    return {
      total: view(total, Number(replies[0])),
      groups: [...rows].map(([key, row], i) => ({ key, ...view(row, Number(replies[i + 1])) })),
    };
  }

  async prune(tenantId: string, before: number) {
    await this.#redis.zremrangebylex(`${this.#t(tenantId)}:ev`, "-", `(${pad(before)}`);
  }
}

async function exec(redis: Redis, commands: (string | string[])[][]): Promise<unknown[]> {
  if (commands.length === 0) return [];
  const pipeline = redis.pipeline(commands.map(([name, ...rest]) => [name as string, ...rest.flat()]));
  return ((await pipeline.exec()) ?? []).map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}

function parseMember(member: string): TelemetryEvent {
  const first = member.indexOf("|");
  const second = member.indexOf("|", first + 1);
  return JSON.parse(member.slice(second + 1)) as TelemetryEvent;
}
