export type AttributeValue = string | number | boolean | null;

/** One accepted telemetry event (docs/telemetry.md). */
export interface TelemetryEvent {
  id: string;
  name: string;
  /** When it happened, as the client said (ISO 8601, UTC). */
  timestamp: string;
  component: string;
  version: string;
  clientId: string;
  attributes: Record<string, AttributeValue>;
  receivedAt: string;
}

export type GroupBy = "name" | "component" | "version" | "day";
export const DIMENSIONS = ["name", "component", "version"] as const;

export interface ListQuery {
  name?: string;
  component?: string;
  /** Epoch ms, inclusive. */
  since: number;
  /** Epoch ms, exclusive. */
  until: number;
  /** Opaque position after which to continue. */
  cursor?: string;
  limit: number;
}

export interface SummaryQuery {
  /** Epoch ms, a whole UTC hour (inclusive). */
  since: number;
  /** Epoch ms, a whole UTC hour (exclusive). */
  until: number;
  groupBy: GroupBy;
  /** A numeric attribute to take p50/p95/max of. */
  metric?: string;
}

export interface MetricStats {
  count: number;
  p50: number | null;
  p95: number | null;
  max: number | null;
}

export interface SummaryRow {
  count: number;
  clients: number;
  metric?: MetricStats;
}

export interface Summary {
  total: SummaryRow;
  groups: (SummaryRow & { key: string })[];
}

/**
 * Telemetry per tenant. On Redis, counts, distinct clients and metric histograms are kept per
 * UTC hour as events arrive, so a summary reads at most a few hundred small keys whatever the
 * number of events; on memory and fs (one process) a summary scans the hours it covers.
 */
export interface TelemetryStore {
  ingest(tenantId: string, events: readonly TelemetryEvent[]): Promise<void>;
  list(tenantId: string, query: ListQuery): Promise<{ events: TelemetryEvent[]; cursor: string | null }>;
  summary(tenantId: string, query: SummaryQuery): Promise<Summary>;
  /** Drops what is older than `before` (epoch ms). */
  prune(tenantId: string, before: number): Promise<void>;
}

export const HOUR_MS = 3_600_000;
export const hourOf = (ms: number) => Math.floor(ms / HOUR_MS);
export const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * Histogram buckets for metric percentiles on Redis: logarithmic, 2 % wide, each read as its
 * geometric middle, so p50 and p95 are within 1 % of the exact value (docs/telemetry.md); zero
 * and negatives get their own buckets. A value range of 1 to 10^6 needs at most 700 buckets.
 */
const GROWTH = Math.log(1.02);
export function bucketOf(value: number): string {
  if (value === 0) return "0";
  return `${value > 0 ? "+" : "-"}${Math.floor(Math.log(Math.abs(value)) / GROWTH)}`;
}
export function bucketValue(bucket: string): number {
  if (bucket === "0") return 0;
  const sign = bucket.startsWith("-") ? -1 : 1;
  return sign * Math.exp((Number(bucket.slice(1)) + 0.5) * GROWTH);
}

/** Nearest-rank percentiles of sorted values. */
export function statsOf(sorted: readonly number[]): MetricStats {
  const at = (p: number) =>
    sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]! : null;
  return { count: sorted.length, p50: at(50), p95: at(95), max: sorted.length ? sorted[sorted.length - 1]! : null };
}

/** Percentiles from bucket counts, capped by the exact maximum. */
export function statsOfHistogram(buckets: Map<string, number>, max: number | null): MetricStats {
  const sorted = [...buckets].map(([bucket, count]) => [bucketValue(bucket), count] as const).sort((a, b) => a[0] - b[0]);
  const count = sorted.reduce((sum, [, n]) => sum + n, 0);
  const at = (p: number) => {
    if (!count) return null;
    const rank = Math.max(1, Math.ceil((p / 100) * count));
    let seen = 0;
    for (const [value, n] of sorted) {
      seen += n;
      if (seen >= rank) return max === null ? value : Math.min(value, max);
    }
    return max;
  };
  const round = (value: number | null) => (value === null ? null : Number(value.toPrecision(6)));
  return { count, p50: round(at(50)), p95: round(at(95)), max: count ? max : null };
}

/** Cursors of the event list: the position (time, id) of the last event returned, opaque to callers. */
export function encodeCursor(ts: number, id: string): string {
  return Buffer.from(`${ts}|${id}`).toString("base64url");
}

export function decodeCursor(cursor: string): { ts: number; id: string } | undefined {
  const [ts, id] = Buffer.from(cursor, "base64url").toString().split("|");
  return ts && id && /^\d{1,15}$/.test(ts) && /^[\w-]{1,64}$/.test(id) ? { ts: Number(ts), id } : undefined;
}
