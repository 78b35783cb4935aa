import cluster from "node:cluster";
import { AggregatorRegistry, type Registry } from "prom-client";

/**
 * GET /metrics under WORKERS (docs/operating.md "Every core"): whichever worker takes the
 * scrape asks the primary (scripts/workers.ts), which gathers every worker's registries
 * through prom-client's cluster aggregation (counters and gauges summed across workers) and
 * answers it. So a scrape of the one port sees the whole host, as it does with one process.
 */
const waiting = new Map<number, { resolve: (value: { contentType: string; body: string }) => void; reject: (error: Error) => void }>();
let next = 0;
let installed = false;

/** In a worker: answer the primary's requests for these registries (prom-client's listener), and read its answers. */
function install(registries: Registry[]): void {
  if (installed) return;
  installed = true;
  // Constructing it installs prom-client's worker side; the registries are this service's.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries(registries);
  process.on("message", (message: { gw?: string; id?: number; body?: string; contentType?: string; error?: string }) => {
    if (message?.gw !== "metrics" || message.id === undefined) return;
    const waiter = waiting.get(message.id);
    if (!waiter) return;
    waiting.delete(message.id);
    if (message.error !== undefined) waiter.reject(new Error(message.error));
    else waiter.resolve({ contentType: message.contentType!, body: message.body! });
  });
}

/** True in a node:cluster worker: its scrape is the cluster's. */
export function clustered(registries: () => Registry[]): boolean {
  if (!cluster.isWorker) return false;
  install(registries());
  return true;
}

/** Every worker's metrics, summed by the primary. */
export function clusterScrape(): Promise<{ contentType: string; body: string }> {
  const id = ++next;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      waiting.delete(id);
      reject(new Error("the primary did not answer with the workers' metrics within 6 s"));
    }, 6000);
    waiting.set(id, {
      resolve: (value) => (clearTimeout(timer), resolve(value)),
      reject: (error) => (clearTimeout(timer), reject(error)),
    });
    process.send!({ gw: "metrics", id });
  });
}
