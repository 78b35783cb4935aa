import type { RoutedModel } from "./model-router.js";
import type { Usage } from "./types.js";
import type { ChatContext } from "./deps.js";

const ms = (since: number) => Math.round((performance.now() - since) * 100) / 100;

/**
 * What one chat request reports: upstream latency and time to first token (metrics by model,
 * and the request's log line), tokens and cost by model and surface once it is metered.
 */
export function observeChat(ctx: ChatContext, model: RoutedModel) {
  const started = performance.now();
  const { metrics } = ctx.deps;
  const fields = ctx.logFields;
  const counters = metrics.chat(model.id, ctx.surface);
  let firstToken = false;
  if (fields) fields.model = model.id;
  return {
    /** The provider answered (its response headers, or the whole answer when not streamed). */
    answered() {
      const latency = ms(started);
      counters.upstreamLatency.observe(latency / 1000);
      if (fields) fields.upstreamLatencyMs = latency;
    },
    /** A streamed chunk carried content: the first one sets the time to first token. */
    token() {
      if (firstToken) return;
      firstToken = true;
      const ttft = ms(started);
      counters.timeToFirstToken.observe(ttft / 1000);
      if (fields) fields.timeToFirstTokenMs = ttft;
    },
    /** The request was metered: tokens and cost at the answering deployment's price (micro-credits). */
    metered(usage: Usage, estimated: boolean, cost: number) {
      counters.inputTokens.inc(usage.prompt_tokens);
      counters.outputTokens.inc(usage.completion_tokens);
      counters.credits.inc(cost);
      if (fields)
        Object.assign(fields, {
          inputTokens: usage.prompt_tokens,
          outputTokens: usage.completion_tokens,
          costMicrocredits: cost,
          ...(estimated ? { usageEstimated: true } : {}),
        });
    },
  };
}
