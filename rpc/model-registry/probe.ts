import { isUpstreamTimeout, upstreamRequest } from "../outbound/upstream.js";
import type { RoutedModel } from "../chat/model-router.js";
import { providerConfigOf, type DeploymentConfig } from "../chat/models-config.js";
import { probeTarget } from "../chat/providers/index.js";

export interface ProbeResult {
  ok: boolean;
  latencyMs: number;
  checkedAt: string;
  error?: string;
}

/**
 * The active check: each provider's own model-listing call with the deployment's key (for
 * OpenAI-compatible upstreams `GET <baseURL>/models`), a cheap call that costs no tokens, bounded by `timeoutMs`. Any 2xx is up; a timeout, a network
 * error or another status is down, with the reason.
 */
export async function probeUpstream(model: RoutedModel, env: Record<string, string | undefined>, timeoutMs: number): Promise<ProbeResult> {
  const deployments = model.deployments.map((deployment) => deployment.config);
  if (deployments.length === 1) return probeDeployment(model, deployments[0]!, env, timeoutMs);
  // Several deployments: up while one answers; the others' failures are named.
  const results = await Promise.all(deployments.map((deployment) => probeDeployment(model, deployment, env, timeoutMs)));
  const up = results.filter((result) => result.ok);
  const failed = results.flatMap((result, index) => (result.ok ? [] : [`deployment ${index}: ${result.error}`]));
  const latencyMs = up.length ? Math.min(...up.map((result) => result.latencyMs)) : Math.max(...results.map((result) => result.latencyMs));
  return { ok: up.length > 0, latencyMs, checkedAt: new Date().toISOString(), ...(failed.length ? { error: failed.join("; ") } : {}) };
}

async function probeDeployment(
  model: RoutedModel,
  config: DeploymentConfig,
  env: Record<string, string | undefined>,
  timeoutMs: number,
): Promise<ProbeResult> {
  // Durations on the monotonic clock; wall-clock time only for when it happened.
  const started = performance.now();
  const done = (ok: boolean, error?: string): ProbeResult => ({
    ok,
    latencyMs: Math.round(performance.now() - started),
    checkedAt: new Date().toISOString(),
    ...(error ? { error } : {}),
  });
  const target = probeTarget(model.id, providerConfigOf(model.config, config), env);
  if (!target) return done(true);
  // Any signed-in user reads a model's health: it says what is missing, never the operator's
  // variable (the chat attempts' log lines name it, docs/observability.md "Logs").
  if ("missing" in target) return done(false, "not configured: the model's upstream credentials are not set");
  if ("skip" in target) return done(true);
  try {
    // The pooled upstream client (rpc/outbound/upstream.ts), as the chat calls it.
    const response = await upstreamRequest(target.url, { method: "GET", headers: target.headers, timeoutMs });
    await response.body.dump().catch(() => undefined);
    return response.statusCode >= 200 && response.statusCode < 300 ? done(true) : done(false, `upstream answered ${response.statusCode}`);
  } catch (error) {
    if (isUpstreamTimeout(error)) return done(false, `no answer within ${timeoutMs} ms`);
    return done(false, `unreachable: ${(error as Error).message.slice(0, 200)}`);
  }
}
