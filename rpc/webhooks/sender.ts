import { setMaxListeners } from "node:events";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { DeliveryAttempt } from "../../storage/repos/webhooks.js";
import type { OutboundGuard, ResolvedAddress, ResolveHost } from "../outbound/outbound-guard.js";
import { sendDelivery, type SendJob } from "./send.js";

/** Makes delivery attempts: on the service's own event loop, or in delivery threads. */
export interface DeliverySender {
  send(job: SendJob): Promise<DeliveryAttempt>;
  /** Cuts the attempts in flight (each ends as "interrupted by shutdown"). */
  abort(): void;
  /** Once nothing is in flight: frees sockets and threads. */
  close(): Promise<void>;
}

/** The attempts on the service's own event loop (WEBHOOKS_SEND_THREADS=0). */
export class LoopSender implements DeliverySender {
  readonly #guard: OutboundGuard;
  readonly #closing = new AbortController();

  constructor(guard: OutboundGuard) {
    this.#guard = guard;
    // One listener per attempt in flight (WEBHOOKS_CONCURRENCY of them), each removed when it ends.
    setMaxListeners(0, this.#closing.signal);
  }

  send(job: SendJob): Promise<DeliveryAttempt> {
    return sendDelivery(this.#guard, job, this.#closing.signal);
  }

  abort(): void {
    this.#closing.abort();
  }

  async close(): Promise<void> {}
}

/** What a delivery thread starts with (`workerData`). */
export interface SendThreadData {
  allowPrivate: boolean;
  hint: string;
}

/** Messages to a delivery thread. */
export type ToThread =
  | { type: "send"; n: number; job: SendJob }
  | { type: "resolved"; n: number; addresses?: ResolvedAddress[]; error?: string; code?: string }
  | { type: "close" };

/** Messages from a delivery thread. */
export type FromThread = { type: "sent"; n: number; attempt: DeliveryAttempt } | { type: "resolve"; n: number; hostname: string };

/**
 * Starts the thread's module next to this one: `send-thread.js` when the service runs compiled
 * (`dist/`, `npm start`); `send-thread.ts` through tsx when it runs from the sources (tsx,
 * vitest), since a worker thread does not inherit the loader of the thread that starts it.
 */
function startThread(data: SendThreadData): Worker {
  if (!import.meta.url.endsWith(".ts")) return new Worker(new URL("./send-thread.js", import.meta.url), { workerData: data });
  const entry = new URL("./send-thread.ts", import.meta.url).href;
  // tsx's "tsx/esm/api" for `import` (its exports map: index.mjs beside the index.cjs `require` finds).
  const tsx = pathToFileURL(
    createRequire(import.meta.url)
      .resolve("tsx/esm/api")
      .replace(/\.cjs$/, ".mjs"),
  ).href;
  const boot = `import(${JSON.stringify(tsx)}).then((m) => m.tsImport(${JSON.stringify(entry)}, ${JSON.stringify(entry)}))`;
  return new Worker(boot, { eval: true, workerData: data });
}

export interface ThreadHooks {
  /** Called with each thread started (tests end one to see what its attempts in flight become). */
  started?(worker: Worker): void;
  /** Called once when a thread fails or exits other than by `close()`, with the reason its attempts in flight got. */
  ended?(reason: string): void;
}

interface Thread {
  worker: Worker;
  pending: Map<number, (attempt: DeliveryAttempt) => void>;
}

/**
 * Attempts in `count` worker threads (WEBHOOKS_SEND_THREADS, docs/webhooks.md "Delivery
 * threads"), so signing, requests and answers do not share the event loop with the requests
 * the service serves. Everything else (the persisted queue, claims and leases, the schedule,
 * storage, metrics) stays on the main thread; a thread gets one attempt's request and answers
 * with its outcome. Threads start at the first attempt, are taken in turn, and one that dies
 * fails its attempts in flight (retried on the schedule) and is started again at the next.
 */
export class ThreadSender implements DeliverySender {
  readonly #threads: (Thread | undefined)[];
  readonly #data: SendThreadData;
  readonly #resolveHost: ResolveHost;
  #turn = 0;
  #next = 0;
  #aborted = false;

  readonly #hooks: ThreadHooks;

  constructor(count: number, data: SendThreadData, resolveHost: ResolveHost, hooks: ThreadHooks = {}) {
    this.#threads = Array.from({ length: Math.max(1, count) }, () => undefined);
    this.#data = data;
    this.#resolveHost = resolveHost;
    this.#hooks = hooks;
  }

  send(job: SendJob): Promise<DeliveryAttempt> {
    const at = new Date().toISOString();
    if (this.#aborted) return Promise.resolve({ at, statusCode: null, durationMs: 0, error: "interrupted by shutdown" });
    const index = this.#turn;
    this.#turn = (this.#turn + 1) % this.#threads.length;
    const thread = (this.#threads[index] ??= this.#start(index));
    const n = this.#next++;
    return new Promise<DeliveryAttempt>((resolve) => {
      if (thread.pending.size === 0) thread.worker.ref();
      thread.pending.set(n, resolve);
      thread.worker.postMessage({ type: "send", n, job } satisfies ToThread);
    });
  }

  abort(): void {
    this.#aborted = true;
    for (const thread of this.#threads) thread?.worker.postMessage({ type: "close" } satisfies ToThread);
  }

  async close(): Promise<void> {
    this.abort();
    await Promise.all(this.#threads.map((thread, index) => (thread ? this.#stop(index, thread) : undefined)));
  }

  #start(index: number): Thread {
    const worker = startThread(this.#data);
    const thread: Thread = { worker, pending: new Map() };
    worker.unref();
    worker.on("message", (message: FromThread) => {
      if (message.type === "sent") {
        const resolve = thread.pending.get(message.n);
        thread.pending.delete(message.n);
        if (thread.pending.size === 0) worker.unref();
        resolve?.(message.attempt);
      } else if (message.type === "resolve") void this.#lookup(worker, message.n, message.hostname);
    });
    let ended = false;
    const fail = (reason: string) => {
      if (!ended && !this.#aborted) this.#hooks.ended?.(reason);
      ended = true;
      if (this.#threads[index] === thread) this.#threads[index] = undefined;
      const at = new Date().toISOString();
      for (const resolve of thread.pending.values()) resolve({ at, statusCode: null, durationMs: 0, error: reason });
      thread.pending.clear();
    };
    worker.on("error", (error) => fail(`delivery thread failed: ${error.message}`));
    worker.on("exit", (code) => fail(this.#aborted ? "interrupted by shutdown" : `delivery thread exited (${code})`));
    this.#hooks.started?.(worker);
    return thread;
  }

  /** A name the thread connects to, resolved by the service's resolver; the thread checks every address. */
  async #lookup(worker: Worker, n: number, hostname: string): Promise<void> {
    let reply: ToThread;
    try {
      reply = { type: "resolved", n, addresses: await this.#resolveHost(hostname) };
    } catch (error) {
      const code = (error as { code?: string })?.code;
      reply = { type: "resolved", n, error: (error as Error)?.message ?? String(error), ...(code ? { code } : {}) };
    }
    worker.postMessage(reply);
  }

  async #stop(index: number, thread: Thread): Promise<void> {
    this.#threads[index] = undefined;
    await thread.worker.terminate();
  }
}
