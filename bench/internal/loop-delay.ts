import { monitorEventLoopDelay } from "node:perf_hooks";

/**
 * Event-loop delay measured inside a benchmark server process (the gateway, the floor proxy),
 * read by the benchmark over the fork's IPC channel: `{loopDelay: "reset"}` starts a new
 * window, `{loopDelay: "read"}` answers `{loopDelay: {p50, p99, max}}` in ms for the window so far.
 * Sampled every 10 ms by Node's own histogram (perf_hooks), off the request path; the histogram
 * holds whole intervals between samples, so the 10 ms of the interval itself is taken off.
 */
const RESOLUTION_MS = 10;
export function answerLoopDelay(): void {
  if (!process.send) return;
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  process.on("message", (message: { loopDelay?: string }) => {
    if (message?.loopDelay === "reset") {
      histogram.reset();
      process.send!({ loopDelay: "reset" });
    } else if (message?.loopDelay === "heap") {
      // Live memory: after a full collection when the process runs with --expose-gc.
      (globalThis as { gc?: () => void }).gc?.();
      const { heapUsed, external, arrayBuffers } = process.memoryUsage();
      process.send!({ loopDelay: { heapKiB: Math.round((heapUsed + external + arrayBuffers) / 1024) } });
    } else if (message?.loopDelay === "read") {
      const ms = (ns: number) => Math.max(0, Math.round(ns / 10_000 - RESOLUTION_MS * 100) / 100);
      process.send!({
        loopDelay: { p50: ms(histogram.percentile(50)), p99: ms(histogram.percentile(99)), max: ms(histogram.max) },
      });
    }
  });
}
