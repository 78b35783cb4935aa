import { Collection } from "../collection.js";
import type { Store } from "../store.js";

export type ModelStatus = "active" | "deprecated" | "disabled";

/** Catalog metadata and provider data of one model (issue 12 "Model registry"). */
export interface ModelEntry {
  id: string;
  displayName: string;
  provider: string;
  upstreamModel: string;
  contextWindow: number;
  maxOutputTokens: number | null;
  /** Micro-credits per 1,000 tokens, as the models document prices them. */
  price: { input: number; output: number };
  modalities: { input: string[]; output: string[] };
  capabilities: { streaming: boolean; tools: boolean; vision: boolean };
  status: ModelStatus;
  /** Set when the status became `deprecated`. */
  deprecatedAt?: string;
  /** Why, or what to use instead; shown in the deprecation warning header. */
  statusNote?: string;
  tags: string[];
  /** The router serves this id (from the models document), or it is catalog metadata only. */
  served: boolean;
  createdAt: string;
  updatedAt: string;
}

/** Model ids carry `/` and `:`, which a key segment may not: they are stored encoded. */
const encode = (id: string) => Buffer.from(id).toString("base64url");

/** Registry entries by model id; global, like the router's models. */
export class ModelRegistryRepo {
  readonly #entries: Collection<ModelEntry>;
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
    this.#entries = new Collection<ModelEntry>(store, "model-registry");
  }

  /** Claims the first write of an entry (seeding from the models document, or a create): false when it exists. */
  claim(id: string): Promise<boolean> {
    return this.#store.atomic.setIfAbsent(`model-registry:${encode(id)}`, "1");
  }

  /** The last active probe of a model, shared by every instance until it expires. */
  async cachedProbe<T>(id: string): Promise<T | null> {
    const raw = await this.#store.atomic.get(`model-probe:${encode(id)}`);
    return raw ? (JSON.parse(raw) as T) : null;
  }

  async cacheProbe(id: string, result: unknown, ttlMs: number): Promise<void> {
    await this.#store.atomic.compareAndSet(
      `model-probe:${encode(id)}`,
      await this.#store.atomic.get(`model-probe:${encode(id)}`),
      JSON.stringify(result),
      ttlMs,
    );
  }

  get(id: string): Promise<ModelEntry | null> {
    return id.length > 0 && id.length <= 128 ? this.#entries.get(encode(id)) : Promise.resolve(null);
  }

  put(entry: ModelEntry): Promise<ModelEntry> {
    return this.#entries.put([encode(entry.id)], entry);
  }

  async list(): Promise<ModelEntry[]> {
    return (await this.#entries.list()).sort((a, b) => a.id.localeCompare(b.id));
  }
}
