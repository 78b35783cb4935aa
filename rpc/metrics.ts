import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Storage } from "unstorage";

/**
 * Prometheus metrics of one running service (`services.metrics`), scraped at `GET /metrics`.
 * Every label value is bounded: surfaces, operation names from the registry (anything else is
 * `other`), HTTP statuses, error codes, model ids from the models document, tool source kinds.
 * Never a path, an id or a user's input.
 */

// Process metrics (CPU, memory, event-loop lag, GC, handles) exist once per process, however
// many services a test process starts: one registry, merged into each scrape.
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry, eventLoopMonitoringPrecision: 20 });
  }
  return processRegistry;
}

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const STORAGE_SECONDS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1];

export type ToolSource = "builtin" | "mcp" | "vm";

/** The source kind of a tool, from its name: `vm__…` is a VM's, `<server>__…` an upstream MCP server's. */
export function toolSourceOf(name: string): ToolSource {
  return name.startsWith("vm__") ? "vm" : name.includes("__") ? "mcp" : "builtin";
}

/** Consumer groups that get a `group` label of their own on one instance; later ones share `other`. */
export const EVENT_LAG_GROUPS = 100;

export class Metrics {
  readonly registry = new Registry();
  /** The consumer groups labelled so far (`lagGroup`). */
  readonly #lagGroups = new Set<string>();
  /** Operation names that may appear as a label (the registry's, plus the transports' own). */
  readonly #operations = new Set<string>(["mcp", "not_found"]);

  readonly httpRequests = new Counter({
    name: "gateway_http_requests_total",
    help: "HTTP requests answered, by surface, operation and status",
    labelNames: ["surface", "operation", "status"] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: "gateway_http_request_duration_seconds",
    help: "Time to answer, to the end of the stream for streamed answers",
    labelNames: ["surface", "operation", "status"] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly dispatcherCalls = new Counter({
    name: "gateway_dispatcher_calls_total",
    help: "Calls through the dispatcher from every transport, by method, surface, transport (rest, rpc, mcp, socket) and outcome (ok or the error code)",
    labelNames: ["method", "surface", "transport", "outcome"] as const,
    registers: [this.registry],
  });
  readonly dispatcherDuration = new Histogram({
    name: "gateway_dispatcher_call_duration_seconds",
    help: "Time a call spent in the dispatcher (to the first item of a streamed result), by method, surface, transport and outcome",
    labelNames: ["method", "surface", "transport", "outcome"] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly refusals = new Counter({
    name: "gateway_refusals_total",
    help: "402 and 429 answers, by status and reason (the error code)",
    labelNames: ["status", "reason"] as const,
    registers: [this.registry],
  });
  readonly upstreamLatency = new Histogram({
    name: "gateway_model_upstream_latency_seconds",
    help: "Time until a model provider answered (its response headers), by model",
    labelNames: ["model"] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly deploymentLatencies = new Histogram({
    name: "gateway_model_deployment_latency_seconds",
    help: "Time until a model deployment answered an attempt (headers when streamed), by model, deployment (index), provider and status class",
    labelNames: ["model", "deployment", "provider", "status_class"] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly timeToFirstToken = new Histogram({
    name: "gateway_model_time_to_first_token_seconds",
    help: "Time from the request to the first streamed content, by model",
    labelNames: ["model"] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly tokens = new Counter({
    name: "gateway_chat_tokens_total",
    help: "Metered tokens of chat and embeddings requests, by model, surface and kind (input, output)",
    labelNames: ["model", "surface", "kind"] as const,
    registers: [this.registry],
  });
  readonly credits = new Counter({
    name: "gateway_chat_cost_microcredits_total",
    help: "Cost of chat and embeddings usage at the model's price, in micro-credits, by model and surface",
    labelNames: ["model", "surface"] as const,
    registers: [this.registry],
  });
  readonly streams = new Gauge({
    name: "gateway_streams_in_flight",
    help: "Streamed answers (SSE: chat completions, agent runs, event subscriptions) being sent now, by surface and operation",
    labelNames: ["surface", "operation"] as const,
    registers: [this.registry],
  });
  readonly toolCalls = new Counter({
    name: "gateway_tool_calls_total",
    help: "Tool calls through the catalog, by source (builtin, mcp, vm) and outcome (ok, tool_error, failed)",
    labelNames: ["source", "outcome"] as const,
    registers: [this.registry],
  });
  /**
   * The `group` label of a tenant's consumer group on `gateway_event_consume_lag_seconds`:
   * `<tenant id>/<group>` for the first EVENT_LAG_GROUPS groups this instance sees, `other` after
   * them, so tenants naming groups cannot grow the series without bound (docs/observability.md).
   */
  lagGroup(tenantId: string, consumer: string): string {
    const name = `${tenantId}/${consumer}`;
    if (this.#lagGroups.has(name)) return name;
    if (this.#lagGroups.size >= EVENT_LAG_GROUPS) return "other";
    this.#lagGroups.add(name);
    return name;
  }

  readonly eventLag = new Histogram({
    name: "gateway_event_consume_lag_seconds",
    help:
      "Time from an event's publication to its lease by a consumer group, by group (tenant/group, the first 100 on this instance, " +
      "then other) and delivery (first, or redelivery after a lease ran out or a nack)",
    labelNames: ["group", "delivery"] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 21_600, 86_400],
    registers: [this.registry],
  });
  readonly storageLatency = new Histogram({
    name: "gateway_storage_operation_seconds",
    help: "Latency of key-value storage operations, by operation",
    labelNames: ["operation"] as const,
    buckets: STORAGE_SECONDS,
    registers: [this.registry],
  });

  /**
   * The children of a metric per label values, kept: prom-client hashes the label object on
   * every `inc`/`observe` otherwise, which the request path pays on every request. Label
   * values are bounded (above), so the map is too.
   */
  readonly #children = new Map<string, unknown>();

  #child<T>(key: string, make: () => T): T {
    let child = this.#children.get(key) as T | undefined;
    if (child === undefined) this.#children.set(key, (child = make()));
    return child;
  }

  /** The HTTP counters of one surface, operation and status. */
  http(surface: string, operation: string, status: string) {
    return this.#child(`http\0${surface}\0${operation}\0${status}`, () => ({
      requests: this.httpRequests.labels(surface, operation, status),
      duration: this.httpDuration.labels(surface, operation, status),
    }));
  }

  /** The in-flight gauge of one surface's streamed operation. */
  streamsOf(surface: string, operation: string) {
    return this.#child(`stream\0${surface}\0${operation}`, () => this.streams.labels(surface, operation));
  }

  /** The per-call metrics of one method, surface, transport and outcome (rpc/policies/observe.ts). */
  call(method: string, surface: string, transport: string, outcome: string) {
    return this.#child(`call\0${method}\0${surface}\0${transport}\0${outcome}`, () => ({
      calls: this.dispatcherCalls.labels(method, surface, transport, outcome),
      duration: this.dispatcherDuration.labels(method, surface, transport, outcome),
    }));
  }

  /** The chat metrics of one model and surface. */
  chat(model: string, surface: string) {
    return this.#child(`chat\0${model}\0${surface}`, () => ({
      upstreamLatency: this.upstreamLatency.labels(model),
      timeToFirstToken: this.timeToFirstToken.labels(model),
      inputTokens: this.tokens.labels(model, surface, "input"),
      outputTokens: this.tokens.labels(model, surface, "output"),
      credits: this.credits.labels(model, surface),
    }));
  }

  /** The latency histogram of one deployment's attempts ending with `statusClass`. */
  deploymentLatency(model: string, deployment: string, provider: string, statusClass: string) {
    return this.#child(`dep\0${model}\0${deployment}\0${provider}\0${statusClass}`, () =>
      this.deploymentLatencies.labels(model, deployment, provider, statusClass),
    );
  }

  /** Allows these operation names as label values. */
  knowOperations(names: Iterable<string>): void {
    for (const name of names) this.#operations.add(name);
  }

  /** The label for an operation: its name when known, else `other` (a JSON-RPC body may name anything). */
  operation(name: string | undefined): string {
    if (name === undefined) return "none";
    return this.#operations.has(name) ? name : "other";
  }

  /** A gauge read at scrape time (MCP sessions, VM sockets). */
  gauge(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  /** Counts a tool call's outcome; `name` only decides the source kind. */
  toolCall(name: string, outcome: "ok" | "tool_error" | "failed"): void {
    this.toolCalls.inc({ source: toolSourceOf(name), outcome });
  }

  /** Times every key-value operation of `kv` (wraps its methods in place). */
  observeStorage(kv: Storage): void {
    const target = kv as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    for (const operation of [
      "getItem",
      "getItems",
      "setItem",
      "setItems",
      "removeItem",
      "hasItem",
      "getKeys",
      "getItemRaw",
      "setItemRaw",
    ]) {
      const original = target[operation];
      if (typeof original !== "function") continue;
      const histogram = this.storageLatency.labels(operation);
      target[operation] = async function timed(this: unknown, ...args: unknown[]) {
        const started = performance.now();
        try {
          return await original.apply(kv, args);
        } finally {
          histogram.observe((performance.now() - started) / 1000);
        }
      };
    }
  }

  /** The exposition text: this service's metrics and the process's. */
  /** The registries a scrape merges (the process's and this service's), for the cluster's aggregate (facade/cluster-metrics.ts). */
  registries(): Registry[] {
    return [processMetrics(), this.registry];
  }

  async scrape(): Promise<{ contentType: string; body: string }> {
    const merged = Registry.merge([processMetrics(), this.registry]);
    return { contentType: merged.contentType, body: await merged.metrics() };
  }
}
