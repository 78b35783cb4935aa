import type { CallSample } from "../chat/observed-provider.js";

/** The window of real traffic passive health looks at (issue 12: the last 5 minutes). */
export const PASSIVE_WINDOW_MS = 5 * 60_000;
/** Samples kept per model: enough for stable percentiles, bounded memory under any load. */
const MAX_SAMPLES = 5_000;

export interface PassiveSnapshot {
  windowSeconds: number;
  requests: number;
  errors: number;
  errorRate: number | null;
  latencyMs: { p50: number | null; p95: number | null };
  ttftMs: { p50: number | null; p95: number | null };
  lastError: { message: string; at: string } | null;
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/**
 * Outcomes of real provider calls per model over the last 5 minutes, in this process (each
 * instance judges the traffic it serves; docs/model-registry.md). The last error is kept
 * beyond the window, so an operator still sees what went wrong.
 */
export class PassiveStats {
  readonly #samples = new Map<string, CallSample[]>();
  readonly #lastError = new Map<string, { message: string; at: number }>();

  record(sample: CallSample): void {
    let list = this.#samples.get(sample.model);
    if (!list) this.#samples.set(sample.model, (list = []));
    list.push(sample);
    if (list.length > MAX_SAMPLES) list.splice(0, list.length - MAX_SAMPLES);
    if (!sample.ok) this.#lastError.set(sample.model, { message: sample.error ?? "failed", at: sample.at });
  }

  snapshot(model: string, now = Date.now()): PassiveSnapshot {
    const since = now - PASSIVE_WINDOW_MS;
    const all = this.#samples.get(model) ?? [];
    const firstInWindow = all.findIndex((sample) => sample.at > since);
    if (firstInWindow === -1) all.length = 0;
    else if (firstInWindow > 0) all.splice(0, firstInWindow);
    const errors = all.filter((sample) => !sample.ok).length;
    const latencies = all.filter((sample) => sample.ok).map((sample) => sample.latencyMs).sort((a, b) => a - b);
    const ttfts = all.flatMap((sample) => (sample.ttftMs === undefined ? [] : [sample.ttftMs])).sort((a, b) => a - b);
    const last = this.#lastError.get(model);
    return {
      windowSeconds: PASSIVE_WINDOW_MS / 1000,
      requests: all.length,
      errors,
      errorRate: all.length ? errors / all.length : null,
      latencyMs: { p50: percentile(latencies, 50), p95: percentile(latencies, 95) },
      ttftMs: { p50: percentile(ttfts, 50), p95: percentile(ttfts, 95) },
      lastError: last ? { message: last.message, at: new Date(last.at).toISOString() } : null,
    };
  }
}
