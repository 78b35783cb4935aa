import { isUpstreamTimeout, upstreamRequest } from "../outbound/upstream.js";
import type { RoutedModel } from "../chat/model-router.js";

export interface ProbeResult {
  ok: boolean;
  latencyMs: number;
  checkedAt: string;
  error?: string;
}

/**
 * The active check (issue 12): the upstream's `GET <baseURL>/models` with the model's key, a
 * cheap call that costs no tokens, bounded by `timeoutMs`. Any 2xx is up; a timeout, a network
 * error or another status is down, with the reason.
 */
export async function probeUpstream(model: RoutedModel, env: Record<string, string | undefined>, timeoutMs: number): Promise<ProbeResult> {
  // Durations on the monotonic clock; wall-clock time only for when it happened.
  const started = performance.now();
  const done = (ok: boolean, error?: string): ProbeResult => ({ ok, latencyMs: Math.round(performance.now() - started), checkedAt: new Date().toISOString(), ...(error ? { error } : {}) });
  const config = model.config;
  if (config.provider === "echo") return done(true);
  const apiKey = config.apiKeyEnv ? env[config.apiKeyEnv] : undefined;
  if (config.apiKeyEnv && !apiKey) return done(false, `not configured: ${config.apiKeyEnv} is not set`);
  try {
    // The pooled upstream client (rpc/outbound/upstream.ts), as the chat calls it.
    const response = await upstreamRequest(config.baseURL.replace(/\/+$/, "") + "/models", {
      method: "GET",
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
      timeoutMs,
    });
    await response.body.dump().catch(() => undefined);
    return response.statusCode >= 200 && response.statusCode < 300 ? done(true) : done(false, `upstream answered ${response.statusCode}`);
  } catch (error) {
    if (isUpstreamTimeout(error)) return done(false, `no answer within ${timeoutMs} ms`);
    return done(false, `unreachable: ${(error as Error).message.slice(0, 200)}`);
  }
}
