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
 */
const port = parentPort;
if (!port) throw new Error("send-thread.ts runs as a worker thread");
const data = workerData as SendThreadData;
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
