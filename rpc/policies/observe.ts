import { toServiceError } from "../errors.js";
import { markFailed, SpanKind, spanLogIds, startSpan, tracingEnabled, withSpan } from "../tracing.js";
import type { Policy } from "./policy.js";

/** A call's outcome as a label: `ok`, or the error code it ended with (INTERNAL for anything unexpected, UNAVAILABLE for storage down). */
export function outcomeOf(error: unknown): string {
  return toServiceError(error).code;
}

/**
 * Accounts for every call, whatever the transport: the per-call metrics
 * (`gateway_dispatcher_calls_total` and `gateway_dispatcher_call_duration_seconds`, by method,
 * surface, transport and outcome) and the call in the log: its method, outcome and duration join
 * the transport's own line (`calls`) when it writes one after the call (REST, `/rpc`, the MCP
 * request's gate, socket upgrades), else the call gets a line of its own (`event: "call"`:
 * MCP tools and resources calls, agent-stream messages). First in the chain, so refusals of
 * every later policy are counted too. While tracing, the call is a span named after its method
 * (surface, transport, the caller's kind, user and workspace, its outcome; never a credential),
 * under the request's server span, and what the handler does nests under it.
 */
export const observe: Policy = {
  name: "observe",
  stage: "call",
  applies: () => true,
  async run(call, next) {
    const started = performance.now();
    const span = tracingEnabled()
      ? startSpan(call.method.name, SpanKind.INTERNAL, {
          "gateway.method": call.method.name,
          "gateway.surface": call.facts.surface,
          "gateway.transport": call.facts.transport ?? "direct",
        })
      : undefined;
    let outcome = "ok";
    try {
      return await (span ? withSpan(span, next) : next());
    } catch (error) {
      outcome = outcomeOf(error);
      throw error;
    } finally {
      const seconds = (performance.now() - started) / 1000;
      const { method, facts, ports, principal } = call;
      const transport = facts.transport ?? "direct";
      const metric = ports.metrics.call(method.name, facts.surface, transport, outcome);
      metric.calls.inc();
      metric.duration.observe(seconds);
      const entry = { method: method.name, outcome, durationMs: Math.round(seconds * 100_000) / 100 };
      const who = principal ? { kind: principal.kind, userId: principal.userId } : undefined;
      if (span) {
        span.setAttribute("gateway.outcome", outcome);
        if (principal) {
          span.setAttribute("gateway.principal.kind", principal.kind);
          span.setAttribute("enduser.id", principal.userId);
          if (principal.workspaceId) span.setAttribute("gateway.workspace_id", principal.workspaceId);
        }
        if (outcome !== "ok") markFailed(span, outcome);
        span.end();
      }
      if (facts.logFields) {
        if (who) facts.logFields.principal ??= who;
        ((facts.logFields.calls ??= []) as unknown[]).push(entry);
      } else {
        ports.log.info({
          requestId: facts.requestId,
          event: "call",
          surface: facts.surface,
          transport,
          ...entry,
          ...(who ? { principal: who } : {}),
          ...(span ? spanLogIds(span) : {}),
        });
      }
    }
  },
};
