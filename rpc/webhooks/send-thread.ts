import { setMaxListeners } from "node:events";
import { readlinkSync } from "node:fs";
import { getPriority, setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import { OutboundGuard, type ResolvedAddress } from "../outbound/outbound-guard.js";
import { sendDelivery } from "./send.js";
import type { FromThread, SendThreadData, ToThread } from "./sender.js";

/**
 * The delivery thread (docs/webhooks.md "Delivery threads"): makes the attempts the service's
 * main thread posts to it (signature, HTTP request, the answer's first bytes) and posts back
 * each outcome. Its connections go through an OutboundGuard of its own, so the address rule
 * is applied here, at connection time, on the address connected to; names are resolved by the
 * main thread's resolver (the one the service was started with) and every address it answers
 * is checked here before the socket uses it.
 *
 * Deliveries are background work: on Linux the thread lowers its own CPU priority (nice
 * raised by BACKGROUND_NICE, this thread only), so on a busy machine the thread that serves requests is
 * scheduled first and deliveries take the time left.
 */
const BACKGROUND_NICE = 10;
const port = parentPort;
if (!port) throw new Error("send-thread.ts runs as a worker thread");
const data = workerData as SendThreadData;
try {
  // "/proc/thread-self" links to "<pid>/task/<tid>"; setpriority on a tid sets that thread's nice.
  const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
  if (tid > 0) setPriority(tid, Math.min(19, getPriority(tid) + BACKGROUND_NICE));
} catch {
  // Not Linux, or not allowed: the thread runs at the process's priority.
}
const resolving = new Map<number, { resolve: (addresses: ResolvedAddress[]) => void; reject: (error: Error) => void }>();
let nextLookup = 0;
const guard = new OutboundGuard({
  allowPrivate: data.allowPrivate,
  hint: data.hint,
  resolve: (hostname) =>
    new Promise<ResolvedAddress[]>((resolve, reject) => {
      const n = nextLookup++;
      resolving.set(n, { resolve, reject });
      port.postMessage({ type: "resolve", n, hostname } satisfies FromThread);
    }),
});
const closing = new AbortController();
// One listener per attempt in flight (WEBHOOKS_CONCURRENCY of them), each removed when it ends.
setMaxListeners(0, closing.signal);

port.on("message", (message: ToThread) => {
  if (message.type === "send") {
    void sendDelivery(guard, message.job, closing.signal).then((attempt) =>
      port.postMessage({ type: "sent", n: message.n, attempt } satisfies FromThread),
    );
  } else if (message.type === "resolved") {
    const waiting = resolving.get(message.n);
    resolving.delete(message.n);
    if (!waiting) return;
    if (message.addresses) waiting.resolve(message.addresses);
    else waiting.reject(Object.assign(new Error(message.error ?? "lookup failed"), message.code ? { code: message.code } : {}));
  } else if (message.type === "close") {
    closing.abort();
    guard.close();
  }
});
