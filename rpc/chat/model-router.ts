import { ServiceError } from "../errors.js";
import type { Config } from "../config.js";
import { deploymentsOf, modeOf, providerConfigOf, type DeploymentConfig, type ModelConfig, type ModelMode } from "./models-config.js";
import { createProvider } from "./providers/index.js";
import type { Provider, ProviderResult, Usage } from "./types.js";
import { observedProvider, type CallObserver } from "./observed-provider.js";
import { tracedProvider } from "./traced-provider.js";
import { DEFAULT_COOLDOWN_SECONDS, Deployment, DeploymentHealth, RoutingProvider, deploymentOf, type RouteTarget } from "./routing.js";
import type { Metrics } from "../metrics.js";
import type { Bus } from "../../storage/bus.js";
import type { DeploymentsRepo } from "../../storage/repos/deployments.js";
import { allowedBy, type PatternLists } from "../allow-list.js";

/** What the model registry says about a model the router serves (docs/model-registry.md). */
export interface RegistryStatus {
  status: "active" | "deprecated" | "disabled";
  /** When it was deprecated (ISO), for the `Deprecation` header. */
  deprecatedAt?: string;
  /** Shown in the warning header, e.g. "use gpt-5 instead". */
  note?: string;
}

/** Completion tokens a hold reserves when neither the request nor the model sets a cap. */
const DEFAULT_OUTPUT_CAP = 4096;

/** One catalog entry as every surface lists it (docs/interface.md 2.1). */
export interface CatalogEntry {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
  context_window: number;
  /** Only on a deprecated model (docs/model-registry.md). */
  deprecated?: true;
  deprecation?: { deprecatedAt: string | null; message: string };
}

export interface RoutedModel extends RouteTarget {
  id: string;
  config: ModelConfig;
  /** Answers for the model: its one deployment, or routing across its deployments and fallbacks. */
  provider: Provider;
  candidates: RoutedModel[];
}

/** The provider of one deployment (docs/providers.md). */
function providerOf(
  id: string,
  model: ModelConfig,
  deployment: DeploymentConfig,
  timeoutSeconds: number,
  env: Record<string, string | undefined>,
): Provider {
  return createProvider(id, providerConfigOf(model, deployment), { timeoutSeconds, env });
}

/**
 * The "model gateway" of docs/interface.md: maps a model id to its provider, lists the catalog at runtime
 * (docs/interface.md 9: clients never hard-code ids) and prices usage.
 */
export class ModelRouter {
  readonly #models = new Map<string, RoutedModel>();
  readonly #created = Math.floor(Date.now() / 1000);
  readonly #registry = new Map<string, RegistryStatus>();
  #observer: CallObserver | undefined;
  #metrics: Metrics | undefined;
  /** The environment upstream keys are read from (apiKeyEnv). */
  readonly env: Record<string, string | undefined>;

  /** Cooldowns and capacity of the deployments, shared through storage once `share` is called. */
  readonly health: DeploymentHealth;

  constructor(models: Record<string, ModelConfig>, config: Pick<Config, "MODEL_TIMEOUT_SECONDS">, env: Record<string, string | undefined>) {
    this.env = env;
    this.health = new DeploymentHealth(
      (model, index) => this.#models.get(model)?.deployments[index],
      () => [...this.#models.values()].flatMap((model) => model.deployments),
    );
    for (const [id, entry] of Object.entries(models)) {
      const observer = () => this.#observer;
      const timeoutSeconds = ("deployments" in entry ? entry.timeoutSeconds : undefined) ?? config.MODEL_TIMEOUT_SECONDS;
      const deployments = deploymentsOf(entry).map(
        (deployment, index) =>
          new Deployment(
            id,
            index,
            deployment,
            observedProvider(
              id,
              tracedProvider(id, index, deployment, providerOf(id, entry, deployment, timeoutSeconds, env), () => this.#metrics),
              observer,
            ),
            deployment.price ?? entry.price,
          ),
      );
      const model: RoutedModel = {
        id,
        config: entry,
        provider: deployments[0]!.provider,
        deployments,
        contextWindow: entry.contextWindow,
        routing: "routing" in entry ? entry.routing : "weighted",
        retries: entry.retries ?? deployments.length - 1,
        cooldownMs: (entry.cooldownSeconds ?? DEFAULT_COOLDOWN_SECONDS) * 1000,
        candidates: [],
        disabled: () => this.#disabled(id),
      };
      this.#models.set(id, model);
    }
    for (const model of this.#models.values()) {
      model.candidates = [model, ...(model.config.fallbacks ?? []).flatMap((id) => this.#models.get(id) ?? [])];
      // One deployment, no retry, no fallback, no capacity: the deployment's provider itself.
      const plain =
        model.deployments.length === 1 && model.retries === 0 && model.candidates.length === 1 && !model.deployments[0]!.limited;
      if (!plain) model.provider = new RoutingProvider(model, this.health);
    }
  }

  /** Shares deployment cooldowns and capacity with every instance on the same store. */
  share(repo: DeploymentsRepo, bus: Bus, metrics?: Metrics): Promise<() => Promise<void>> {
    this.#metrics = metrics;
    return this.health.share(repo, bus, metrics);
  }

  /** Every provider call's outcome goes to `observer` (the model registry's passive health). */
  observe(observer: CallObserver | undefined): void {
    this.#observer = observer;
  }

  /** Where calls that do not go through a deployment's provider (embeddings) report their outcome. */
  get observer(): CallObserver | undefined {
    return this.#observer;
  }

  /** The model registry's status of a served model: `disabled` is refused like a non-public one. */
  setRegistryStatus(id: string, status: RegistryStatus): void {
    this.#registry.set(id, status);
  }

  /** The routed model of an id, whatever its status (for health probes). */
  get(id: string): RoutedModel | undefined {
    return this.#models.get(id);
  }

  /**
   * Marks a response that used a deprecated model (docs/model-registry.md): `Deprecation`
   * (RFC 9745) with when, and `X-Model-Warning` saying which model and what to do.
   */
  annotate(id: string, headers: Headers): void {
    const deprecation = this.deprecation(id);
    if (!deprecation) return;
    const since = deprecation.deprecatedAt ? Math.floor(Date.parse(deprecation.deprecatedAt) / 1000) : undefined;
    headers.set("Deprecation", since !== undefined && Number.isFinite(since) ? `@${since}` : "true");
    headers.set("X-Model-Warning", deprecation.message.replace(/[^\x20-\x7e]/g, "?"));
  }

  /** A deprecated model's notice (docs/model-registry.md): when, and what to tell the caller. */
  deprecation(id: string): { deprecatedAt: string | null; message: string } | undefined {
    const entry = this.#registry.get(id);
    if (entry?.status !== "deprecated") return undefined;
    return { deprecatedAt: entry.deprecatedAt ?? null, message: `The model '${id}' is deprecated${entry.note ? `: ${entry.note}` : ""}` };
  }

  #disabled(id: string): boolean {
    return this.#registry.get(id)?.status === "disabled";
  }

  /**
   * Every listed model, public or not (docs/interface.md 2.1: the catalog is not filtered per key),
   * but a caller held to allow-lists sees only the models they allow (docs/access-control.md).
   */
  list(allowed?: PatternLists): CatalogEntry[] {
    return [...this.#models.values()]
      .filter(({ id }) => allowedBy(allowed, id))
      .map(({ id, config }) => {
        const deprecation = this.deprecation(id);
        return {
          id,
          object: "model",
          created: this.#created,
          owned_by:
            config.ownedBy ?? (deploymentsOf(config).every((deployment) => deployment.provider === "echo") ? "gateway" : "upstream"),
          context_window: config.contextWindow,
          // The catalog entry is where a Platform caller learns of a deprecation (docs/interface.md 4.2 allows no other header).
          ...(deprecation ? { deprecated: true, deprecation } : {}),
        };
      });
  }

  /** Ids a request may use (optionally only those a plan allows, those of one mode, and those the caller's allow-lists allow). */
  usableIds(plan?: string, mode?: ModelMode, allowed?: PatternLists): string[] {
    return [...this.#models.values()]
      .filter(
        ({ id, config }) =>
          config.public &&
          !this.#disabled(id) &&
          allowedBy(allowed, id) &&
          (!plan || !config.plans || config.plans.includes(plan)) &&
          (!mode || modeOf(config) === mode),
      )
      .map(({ id }) => id);
  }

  /**
   * The model for a chat request (or, with `mode` `embedding`, an embeddings request). Unknown
   * and non-public ids get the same 403 listing the usable ids of that mode (docs/interface.md
   * 7.2); a model of the other mode is 400 (docs/embeddings.md "Which models embed"); with no
   * model configured at all, chat is unavailable (503). The caller's allow-lists (`allowed`,
   * rpc/allow-list.ts) are the one check of every surface and dialect: a model they do not allow
   * is refused like an unknown one, and the usable ids listed are only those they allow.
   */
  resolve(id: string, allowed: PatternLists, plan?: string, mode: ModelMode = "chat"): RoutedModel {
    if (this.#models.size === 0) throw new ServiceError("UNAVAILABLE", "Chat service not configured: no models are set up");
    const model = this.#models.get(id);
    if (!model?.config.public || this.#disabled(id) || !allowedBy(allowed, id)) {
      const usable = this.usableIds(undefined, mode, allowed);
      throw new ServiceError(
        "MODEL_NOT_AVAILABLE",
        `The model '${id}' is not available on this API. Usable models: ${usable.join(", ") || "none"}`,
        {
          details: { usable },
        },
      );
    }
    if (plan && model.config.plans && !model.config.plans.includes(plan)) {
      const usable = this.usableIds(plan, mode, allowed);
      throw new ServiceError(
        "INSUFFICIENT_CAPABILITY",
        `The model '${id}' is not included in the ${plan} plan. Usable models: ${usable.join(", ") || "none"}`,
        {
          details: { usable },
        },
      );
    }
    if (modeOf(model.config) !== mode) {
      const usable = this.usableIds(plan, mode, allowed);
      throw new ServiceError(
        "VALIDATION_FAILED",
        mode === "embedding"
          ? `The model '${id}' is a chat model, not an embedding model. Embedding models: ${usable.join(", ") || "none"}`
          : `The model '${id}' is an embedding model, not a chat model (embeddings: POST /embeddings on the Account and Gateway APIs). Chat models: ${usable.join(", ") || "none"}`,
        { details: { issues: [{ path: "model", message: `'${id}' is a ${modeOf(model.config)} model` }], usable } },
      );
    }
    return model;
  }

  /**
   * The most completion tokens a request can produce: its `max_tokens` as sent (OpenRouter's
   * rule), else the model's `maxOutputTokens` (default 4096) within what the context window
   * leaves after the prompt.
   */
  outputCap(model: RoutedModel, promptTokens: number, maxTokens?: number): number {
    if (maxTokens !== undefined) return maxTokens;
    let cap = 1;
    // Any fallback may answer: the largest cap among them (docs/providers.md "Money").
    for (const candidate of model.candidates) cap = Math.max(cap, ownOutputCap(candidate.config, promptTokens));
    return cap;
  }

  /**
   * The most a request can cost: its prompt and output cap at the dearest price among every
   * deployment of the model and of its fallbacks, each with its own output cap (what one hold
   * covers, docs/providers.md "Money").
   */
  maxCost(model: RoutedModel, promptTokens: number, maxTokens?: number): number {
    let most = 0;
    for (const candidate of model.candidates) {
      const output = maxTokens ?? ownOutputCap(candidate.config, promptTokens);
      for (const deployment of candidate.deployments) {
        most = Math.max(most, priced(deployment.price, promptTokens, output));
      }
    }
    return most;
  }

  /**
   * What the prompt alone costs, known before any model runs: at the cheapest input price among
   * every deployment of the model and of its fallbacks (the least any answer can cost; a request
   * whose balance is below it is refused, docs/billing.md "Admission").
   */
  inputCost(model: RoutedModel, promptTokens: number): number {
    let least = Number.POSITIVE_INFINITY;
    for (const candidate of model.candidates) {
      for (const deployment of candidate.deployments) least = Math.min(least, priced(deployment.price, promptTokens, 0));
    }
    return Number.isFinite(least) ? least : 0;
  }

  /**
   * Micro-credits for `usage` per 1,000 tokens, rounded up: at the price of the deployment that
   * answered `result` when known, else at the model's.
   */
  cost(model: RoutedModel, usage: Usage, result?: ProviderResult): number {
    const price = deploymentOf(result)?.price ?? model.deployments[0]?.price ?? model.config.price;
    return priced(price, usage.prompt_tokens, usage.completion_tokens);
  }
}

/** Micro-credits for these tokens at this price per 1,000 tokens, rounded up (docs/models-and-chat.md "Metering and credits"). */
export function priced(price: { input: number; output: number }, promptTokens: number, completionTokens: number): number {
  return Math.ceil((promptTokens * price.input + completionTokens * price.output) / 1000);
}

function ownOutputCap(config: ModelConfig, promptTokens: number): number {
  return Math.max(1, Math.min(config.maxOutputTokens ?? DEFAULT_OUTPUT_CAP, config.contextWindow - promptTokens));
}
