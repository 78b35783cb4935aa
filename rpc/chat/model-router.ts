import { ServiceError } from "../errors.js";
import type { Config } from "../config.js";
import type { ModelConfig } from "./models-config.js";
import { createProvider } from "./providers/index.js";
import type { Provider, Usage } from "./types.js";
import { observedProvider, type CallObserver } from "./observed-provider.js";

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

/** One catalog entry as every surface lists it (spec 2.1). */
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

export interface RoutedModel {
  id: string;
  config: ModelConfig;
  provider: Provider;
}

/**
 * The spec's "model gateway": maps a model id to its provider, lists the catalog at runtime
 * (spec 9: clients never hard-code ids) and prices usage.
 */
export class ModelRouter {
  readonly #models = new Map<string, RoutedModel>();
  readonly #created = Math.floor(Date.now() / 1000);
  readonly #registry = new Map<string, RegistryStatus>();
  #observer: CallObserver | undefined;
  /** The environment upstream keys are read from (apiKeyEnv). */
  readonly env: Record<string, string | undefined>;

  constructor(models: Record<string, ModelConfig>, config: Pick<Config, "MODEL_TIMEOUT_SECONDS">, env: Record<string, string | undefined>) {
    this.env = env;
    for (const [id, entry] of Object.entries(models)) {
      const provider = createProvider(id, entry, { timeoutSeconds: config.MODEL_TIMEOUT_SECONDS, env });
      this.#models.set(id, { id, config: entry, provider: observedProvider(id, provider, () => this.#observer) });
    }
  }

  /** Every provider call's outcome goes to `observer` (the model registry's passive health). */
  observe(observer: CallObserver | undefined): void {
    this.#observer = observer;
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

  /** Every listed model, public or not (spec 2.1: the catalog is not filtered per key). */
  list(): CatalogEntry[] {
    return [...this.#models.values()].map(({ id, config }) => {
      const deprecation = this.deprecation(id);
      return {
        id,
        object: "model",
        created: this.#created,
        owned_by: config.ownedBy ?? (config.provider === "echo" ? "gateway" : "upstream"),
        context_window: config.contextWindow,
        // The catalog entry is where a Platform caller learns of a deprecation (spec 4.2 allows no other header).
        ...(deprecation ? { deprecated: true, deprecation } : {}),
      };
    });
  }

  /** Ids a chat request may use (optionally only those a plan allows). */
  usableIds(plan?: string): string[] {
    return [...this.#models.values()]
      .filter(({ id, config }) => config.public && !this.#disabled(id) && (!plan || !config.plans || config.plans.includes(plan)))
      .map(({ id }) => id);
  }

  /**
   * The model for a chat request. Unknown and non-public ids get the same 403 listing the
   * usable ids (spec 7.2); with no model configured at all, chat is unavailable (503).
   */
  resolve(id: string, plan?: string): RoutedModel {
    if (this.#models.size === 0) throw new ServiceError("UNAVAILABLE", "Chat service not configured: no models are set up");
    const model = this.#models.get(id);
    if (!model || !model.config.public || this.#disabled(id)) {
      const usable = this.usableIds();
      throw new ServiceError("MODEL_NOT_AVAILABLE", `The model '${id}' is not available on this API. Usable models: ${usable.join(", ") || "none"}`, {
        details: { usable },
      });
    }
    if (plan && model.config.plans && !model.config.plans.includes(plan)) {
      const usable = this.usableIds(plan);
      throw new ServiceError("INSUFFICIENT_CAPABILITY", `The model '${id}' is not included in the ${plan} plan. Usable models: ${usable.join(", ") || "none"}`, {
        details: { usable },
      });
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
    const { contextWindow, maxOutputTokens } = model.config;
    return Math.max(1, Math.min(maxOutputTokens ?? DEFAULT_OUTPUT_CAP, contextWindow - promptTokens));
  }

  /** Micro-credits for `usage` at the model's price per 1,000 tokens, rounded up. */
  cost(model: RoutedModel, usage: Usage): number {
    const { input, output } = model.config.price;
    return Math.ceil((usage.prompt_tokens * input + usage.completion_tokens * output) / 1000);
  }
}
