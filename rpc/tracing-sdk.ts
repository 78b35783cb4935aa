import type { Logger } from "./log.js";
import { useTracer } from "./tracing.js";

/**
 * Starts the OpenTelemetry SDK when the process environment asks for traces (docs/observability.md
 * "Traces"): an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`),
 * neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none`. The SDK itself reads the rest
 * of the standard variables: headers, timeout, sampler and its argument, service name and
 * resource attributes. `OTEL_EXPORTER_OTLP_PROTOCOL` (or its `_TRACES_` form) picks
 * `http/protobuf` (the default) or `http/json`.
 *
 * Tracing is process-wide, like the SDK's context manager: the first service of a process that
 * starts it registers the tracer provider, later ones share it, and the last one to close
 * flushes and shuts it down. Without the variables nothing is loaded.
 */

type Env = Record<string, string | undefined>;

export type TraceProtocol = "http/protobuf" | "http/json";

/** The protocol traces are exported with, or undefined when tracing is off. */
export function traceProtocol(env: Env): TraceProtocol | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? "otlp").split(",").map((name) => name.trim().toLowerCase());
  if (!exporters.includes("otlp")) return undefined;
  if (!env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() && !env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim()) return undefined;
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? "http/protobuf").trim();
  if (protocol !== "http/protobuf" && protocol !== "http/json")
    throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: use http/protobuf or http/json`);
  return protocol;
}

let started: { users: number; shutdown: () => Promise<void> } | undefined;

/** Starts tracing if the environment asks for it; resolves with the function that releases it. */
export async function startTracing(log: Logger, env: Env = process.env): Promise<(() => Promise<void>) | undefined> {
  const protocol = traceProtocol(env);
  if (!protocol) return undefined;
  if (!started) {
    const [{ NodeTracerProvider }, { BatchSpanProcessor }, resources, exporters] = await Promise.all([
      import("@opentelemetry/sdk-trace-node"),
      import("@opentelemetry/sdk-trace-base"),
      import("@opentelemetry/resources"),
      protocol === "http/json" ? import("@opentelemetry/exporter-trace-otlp-http") : import("@opentelemetry/exporter-trace-otlp-proto"),
    ]);
    const resource = resources
      .defaultResource()
      .merge(resources.resourceFromAttributes({ "service.name": "chat-agent-tool-gateway" }))
      .merge(resources.detectResources({ detectors: [resources.envDetector] }));
    const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new exporters.OTLPTraceExporter())] });
    // The AsyncLocalStorage context manager and the W3C propagator, process-wide.
    provider.register();
    useTracer(provider.getTracer("chat-agent-tool-gateway"));
    started = {
      users: 0,
      async shutdown() {
        useTracer(undefined);
        await provider.shutdown();
      },
    };
    log.info({ event: "tracing.started", protocol });
  }
  const current = started;
  current.users++;
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    if (--current.users > 0 || started !== current) return;
    started = undefined;
    await current.shutdown().catch((error: unknown) => log.error({ event: "tracing.shutdown_failed", error: String(error) }));
  };
}
