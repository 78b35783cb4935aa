/** ISO 8601 in UTC without the zone suffix, as docs/interface.md 2.6 shows agent timestamps: `2026-11-22T18:30:00.123`. */
export function agentTimestamp(date: Date = new Date()): string {
  return date.toISOString().slice(0, -1);
}

/** The calendar month (UTC) a token allowance counts in: `2026-11`. */
export function monthKey(date: Date = new Date()): string {
  return date.toISOString().slice(0, 7);
}

/** Waits `ms`, or less: it resolves at once when `signal` aborts (a caller gone, a shutdown). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (ms <= 0 || signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
