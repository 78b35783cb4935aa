import {
  context,
  defaultTextMapGetter,
  isSpanContextValid,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type Tracer,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { isServiceError } from "./errors.js";

/**
 * Traces (docs/observability.md "Traces"), through the OpenTelemetry API. Off unless the
 * process started the SDK (rpc/tracing-sdk.ts, on the standard OTEL_* variables): every helper
 * here then does nothing but call through, one boolean test, so a service without tracing
 * pays nothing for it. Spans never carry a secret, a prompt or a completion: names, ids,
 * counts, models and outcomes only.
 */

let tracer: Tracer | undefined;
const propagator = new W3CTraceContextPropagator();

export { SpanKind };
export type { Span };

/** Turns tracing on with the SDK's tracer, or off (undefined). */
export function useTracer(next: Tracer | undefined): void {
  tracer = next;
}

export function tracingEnabled(): boolean {
  return tracer !== undefined;
}

/** A context continuing a W3C `traceparent` (the root context when there is none or it is malformed). */
export function contextFrom(traceparent: string | undefined, base: Context = ROOT_CONTEXT): Context {
  return traceparent ? propagator.extract(base, { traceparent }, defaultTextMapGetter) : base;
}

const format = (span: SpanContext) => `00-${span.traceId}-${span.spanId}-${span.traceFlags & 1 ? "01" : "00"}`;

/** The `traceparent` naming the span of `ctx` (the active one by default), if any. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  const span = trace.getSpanContext(ctx);
  return span && isSpanContextValid(span) ? format(span) : undefined;
}

/** The `traceparent` naming `span`, for its peer. */
export function spanTraceparent(span: Span): string {
  return format(span.spanContext());
}

/**
 * The `traceparent` to send to a peer (a provider, an MCP server, a VM, a webhook receiver, the
 * orchestrator, the manager): the active span's while tracing, else the caller's as it came.
 */
export function outgoingTraceparent(caller?: string): string | undefined {
  return tracer ? (traceparentOf() ?? caller) : caller;
}

/** Starts a span under `parent` (the active context by default); undefined while tracing is off. */
export function startSpan(name: string, kind: SpanKind, attributes: Attributes, parent: Context = context.active()): Span | undefined {
  return tracer?.startSpan(name, { kind, attributes }, parent);
}

/** Runs `fn` continuing a peer's `traceparent` (a message from another instance); `fn()` while tracing is off. */
export function continueFrom<T>(traceparent: string | undefined, fn: () => T): T {
  return tracer && traceparent ? context.with(contextFrom(traceparent), fn) : fn();
}

/** Runs `fn` with `span` as the active span (`fn` itself when there is none). */
export function withSpan<T>(span: Span | undefined, fn: () => T, parent: Context = context.active()): T {
  return span ? context.with(trace.setSpan(parent, span), fn) : fn();
}

/**
 * Runs `fn` in a new span, ended when `fn` settles; a thrown error marks it failed (with its
 * code, never its message). Without tracing, `fn()` and nothing else.
 */
export async function inSpan<T>(
  name: string,
  kind: SpanKind,
  attributes: Attributes,
  fn: (span: Span | undefined) => Promise<T>,
  parent?: Context,
): Promise<T> {
  if (!tracer) return fn(undefined);
  const base = parent ?? context.active();
  const span = tracer.startSpan(name, { kind, attributes }, base);
  try {
    return await context.with(trace.setSpan(base, span), () => fn(span));
  } catch (error) {
    failSpan(span, error);
    throw error;
  } finally {
    span.end();
  }
}

/** Adds attributes to the active span (inside a handler, its call's span): the tenant a call acts in. */
export function annotateActive(attributes: Attributes): void {
  if (tracer) trace.getActiveSpan()?.setAttributes(attributes);
}

/** What went wrong, as a span may say it: the error code or upstream status, never a message. */
export function errorType(error: unknown): string {
  // A provider's answer: its HTTP status (rpc/chat/providers/provider-error.ts).
  const upstream = (error as { upstreamStatus?: unknown })?.upstreamStatus;
  if (typeof upstream === "number") return String(upstream);
  if (isServiceError(error)) return error.code;
  const status = (error as { status?: unknown })?.status;
  if (typeof status === "number") return String(status);
  return error instanceof Error ? error.name : "unknown";
}

export function failSpan(span: Span | undefined, error: unknown): void {
  if (span) markFailed(span, errorType(error));
}

/** Marks a span failed with `type` (`error.type` and an error status). */
export function markFailed(span: Span, type: string): void {
  span.setAttribute("error.type", type);
  span.setStatus({ code: SpanStatusCode.ERROR, message: type });
}

/** `trace_id` and `span_id` of the active span, for a log line (undefined without one). */
export function activeLogIds(): { trace_id: string; span_id: string } | undefined {
  if (!tracer) return undefined;
  const span = trace.getSpanContext(context.active());
  return span && isSpanContextValid(span) ? { trace_id: span.traceId, span_id: span.spanId } : undefined;
}

/** `trace_id` and `span_id` of a span, for a log line. */
export function spanLogIds(span: Span): { trace_id: string; span_id: string } {
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}
