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
  readonly #samples = new Map<string, SampleRing>();
  readonly #lastError = new Map<string, { message: string; at: number }>();

  /** On every provider call: O(1), the oldest sample overwritten once a model has MAX_SAMPLES. */
  record(sample: CallSample): void {
    let ring = this.#samples.get(sample.model);
    if (!ring) this.#samples.set(sample.model, (ring = new SampleRing(MAX_SAMPLES)));
    ring.push(sample);
    if (!sample.ok) this.#lastError.set(sample.model, { message: sample.error ?? "failed", at: sample.at });
  }

  snapshot(model: string, now = Date.now()): PassiveSnapshot {
    const since = now - PASSIVE_WINDOW_MS;
    const all = this.#samples.get(model)?.since(since) ?? [];
    const errors = all.filter((sample) => !sample.ok).length;
    const latencies = all
      .filter((sample) => sample.ok)
      .map((sample) => sample.latencyMs)
      .sort((a, b) => a - b);
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

/** The last `capacity` samples of one model, oldest first, in a fixed array (no shifting on push). */
class SampleRing {
  readonly #slots: CallSample[] = [];
  /** Where the next sample goes once the ring is full (then also the oldest). */
  #next = 0;

  constructor(readonly capacity: number) {}

  push(sample: CallSample): void {
    if (this.#slots.length < this.capacity) this.#slots.push(sample);
    else {
      this.#slots[this.#next] = sample;
      this.#next = (this.#next + 1) % this.capacity;
    }
  }

  /** Samples taken after `since`, oldest first. */
  since(since: number): CallSample[] {
    const ordered = this.#next === 0 ? this.#slots : [...this.#slots.slice(this.#next), ...this.#slots.slice(0, this.#next)];
    return ordered.filter((sample) => sample.at > since);
  }
}
