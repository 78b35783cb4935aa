import type { Config } from "../config.js";
import type { ModelRouter, RoutedModel } from "../chat/model-router.js";
import { deploymentsOf, type ModelConfig } from "../chat/models-config.js";
import type { Bus } from "../../storage/bus.js";
import type { ModelEntry, ModelRegistryRepo } from "../../storage/repos/model-registry.js";
import { nowIso } from "../../storage/ids.js";
import { PassiveStats, type PassiveSnapshot } from "./passive-stats.js";
import { probeUpstream, type ProbeResult } from "./probe.js";

const CHANNEL = "model-registry";

/** Fewest real requests in the window before the error rate is judged (one failure of two is noise). */
const MIN_REQUESTS = 5;
const DOWN_ERROR_RATE = 0.5;
const DEGRADED_ERROR_RATE = 0.1;

export type HealthStatus = "healthy" | "degraded" | "down";

export interface ModelHealth {
  id: string;
  status: HealthStatus;
  reasons: string[];
  passive: PassiveSnapshot;
  active: (ProbeResult & { cached: boolean }) | null;
  lastError: { message: string; at: string } | null;
  checkedAt: string;
  /** Each deployment of the model (docs/providers.md "Cooldown"): cooling down is shared by every instance. */
  deployments: DeploymentHealthView[];
}

export interface DeploymentHealthView {
  index: number;
  provider: string;
  upstreamModel: string;
  weight: number;
  /** Requests in flight from this instance. */
  inFlight: number;
  coolingDown: boolean;
  cooldownUntil: string | null;
}

/**
 * The model registry (docs/model-registry.md): catalog entries seeded from the models
 * document, the statuses the router obeys (kept in step on every instance through the bus),
 * and health from real traffic (passive) and a cached upstream probe (active).
 */
export class ModelRegistry {
  readonly repo: ModelRegistryRepo;
  readonly stats = new PassiveStats();
  readonly #router: ModelRouter;
  readonly #bus: Bus;
  readonly #config: Pick<Config, "MODEL_HEALTH_TTL_SECONDS" | "MODEL_HEALTH_PROBE_TIMEOUT_MS">;
  readonly #probing = new Map<string, Promise<ProbeResult>>();
  #unsubscribe: (() => Promise<void>) | undefined;

  constructor(
    repo: ModelRegistryRepo,
    router: ModelRouter,
    bus: Bus,
    config: Pick<Config, "MODEL_HEALTH_TTL_SECONDS" | "MODEL_HEALTH_PROBE_TIMEOUT_MS">,
  ) {
    this.repo = repo;
    this.#router = router;
    this.#bus = bus;
    this.#config = config;
  }

  /** Seeds an entry for every model the router serves, applies stored statuses, follows changes. */
  async start(): Promise<void> {
    this.#router.observe((sample) => this.stats.record(sample));
    this.#unsubscribe = await this.#bus.subscribe(CHANNEL, (message) => this.#apply(message as ModelEntry));
    const now = nowIso();
    for (const catalog of this.#router.list()) {
      const routed = this.#router.get(catalog.id)!;
      if (await this.repo.claim(catalog.id)) await this.repo.put(seedEntry(routed.id, routed.config, now));
    }
    for (const entry of await this.repo.list()) this.#apply(entry);
  }

  async stop(): Promise<void> {
    this.#router.observe(undefined);
    await this.#unsubscribe?.();
  }

  /** Stores an entry and tells every instance's router. */
  async save(entry: ModelEntry): Promise<ModelEntry> {
    await this.repo.put(entry);
    this.#apply(entry);
    await this.#bus.publish(CHANNEL, entry);
    return entry;
  }

  serves(id: string): boolean {
    return this.#router.get(id) !== undefined;
  }

  #apply(entry: ModelEntry): void {
    if (!entry || typeof entry.id !== "string" || !this.#router.get(entry.id)) return;
    this.#router.setRegistryStatus(entry.id, { status: entry.status, deprecatedAt: entry.deprecatedAt, note: entry.statusNote });
  }

  /**
   * healthy, degraded or down with the numbers behind it. Down: the probe failed, or half of at
   * least 5 real requests in the last 5 minutes failed. Degraded: 10 % failed, or the probe took
   * over half its timeout. The echo model runs in process and is always healthy.
   */
  async health(entry: ModelEntry): Promise<ModelHealth> {
    const passive = this.stats.snapshot(entry.id);
    const checkedAt = nowIso();
    const routed = this.#router.get(entry.id);
    if (!routed) {
      return {
        id: entry.id,
        status: "down",
        reasons: ["not served by this deployment's models document"],
        passive,
        active: null,
        lastError: passive.lastError,
        checkedAt,
        deployments: [],
      };
    }
    const deployments = await this.#deployments(routed);
    if (routed.deployments.every((deployment) => deployment.config.provider === "echo")) {
      return {
        id: entry.id,
        status: "healthy",
        reasons: ["built-in echo model"],
        passive,
        active: { ok: true, latencyMs: 0, checkedAt, cached: false },
        lastError: null,
        checkedAt,
        deployments,
      };
    }
    const active = await this.#probe(entry.id);
    const reasons: string[] = [];
    let status: HealthStatus = "healthy";
    const worsen = (to: HealthStatus, reason: string) => {
      reasons.push(reason);
      if (to === "down" || status === "healthy") status = to;
    };
    const cooling = deployments.filter((deployment) => deployment.coolingDown);
    if (cooling.length === deployments.length) worsen("down", `every deployment is cooling down after repeated failures`);
    else
      for (const deployment of cooling)
        worsen(
          "degraded",
          `deployment ${deployment.index} (${deployment.provider} ${deployment.upstreamModel}) is cooling down until ${deployment.cooldownUntil}`,
        );
    if (!active.ok) worsen("down", `probe failed: ${active.error}`);
    else if (active.latencyMs > this.#config.MODEL_HEALTH_PROBE_TIMEOUT_MS / 2) worsen("degraded", `probe took ${active.latencyMs} ms`);
    if (passive.requests >= MIN_REQUESTS && passive.errorRate !== null) {
      const pct = `${Math.round(passive.errorRate * 100)} % of ${passive.requests} requests failed in the last ${passive.windowSeconds / 60} minutes`;
      if (passive.errorRate >= DOWN_ERROR_RATE) worsen("down", pct);
      else if (passive.errorRate >= DEGRADED_ERROR_RATE) worsen("degraded", pct);
    }
    const probeError = active.ok ? null : { message: active.error ?? "probe failed", at: active.checkedAt };
    const lastError = [passive.lastError, probeError].filter((e) => e !== null).sort((a, b) => b!.at.localeCompare(a!.at))[0] ?? null;
    return { id: entry.id, status, reasons, passive, active, lastError, checkedAt, deployments };
  }

  async #deployments(routed: RoutedModel): Promise<DeploymentHealthView[]> {
    return Promise.all(
      routed.deployments.map(async (deployment) => {
        const until = await this.#router.health.cooldownUntil(deployment);
        const config = deployment.config as { provider: string; upstreamModel?: string };
        return {
          index: deployment.index,
          provider: config.provider,
          upstreamModel: config.upstreamModel ?? routed.id,
          weight: deployment.weight,
          inFlight: deployment.inFlight,
          coolingDown: until > 0,
          cooldownUntil: until > 0 ? new Date(until).toISOString() : null,
        };
      }),
    );
  }

  async #probe(id: string): Promise<ProbeResult & { cached: boolean }> {
    const cached = await this.repo.cachedProbe<ProbeResult>(id);
    if (cached) return { ...cached, cached: true };
    let running = this.#probing.get(id);
    if (!running) {
      running = probeUpstream(this.#router.get(id)!, this.#router.env, this.#config.MODEL_HEALTH_PROBE_TIMEOUT_MS)
        .then(async (result) => {
          await this.repo.cacheProbe(id, result, this.#config.MODEL_HEALTH_TTL_SECONDS * 1000);
          return result;
        })
        .finally(() => this.#probing.delete(id));
      this.#probing.set(id, running);
    }
    return { ...(await running), cached: false };
  }
}

function seedEntry(id: string, config: ModelConfig, now: string): ModelEntry {
  // The first deployment stands for the model (docs/model-registry.md).
  const first = deploymentsOf(config)[0]! as { provider: string; upstreamModel?: string };
  const upstream = first.provider !== "echo";
  return {
    id,
    displayName: id,
    provider: first.provider,
    upstreamModel: upstream ? (first.upstreamModel ?? id) : id,
    contextWindow: config.contextWindow,
    maxOutputTokens: null,
    price: { ...config.price },
    modalities: { input: ["text"], output: ["text"] },
    capabilities: { streaming: true, tools: upstream, vision: false },
    status: "active",
    tags: config.public ? [] : ["private"],
    served: true,
    createdAt: now,
    updatedAt: now,
  };
}
