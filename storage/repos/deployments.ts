import type { Store } from "../store.js";

/** A deployment as storage names it: its model id and its place in the model's list. */
export interface DeploymentRef {
  model: string;
  index: number;
}

/** Model ids carry `/` and `:`, which a key segment may not: they are encoded. */
const encode = (id: string) => Buffer.from(id).toString("base64url");

/**
 * Shared state of model deployments (docs/providers.md "Cooldown" and "Capacity"): failure
 * counts, cooldowns, and requests and tokens per minute, counted across every instance on the
 * same store (Redis with STORAGE=redis). Only failures and configured capacities touch it; a
 * request to a healthy deployment without `rpm`/`tpm` never does.
 */
export class DeploymentsRepo {
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
  }

  #key(kind: "failures" | "cooldown" | "rpm" | "tpm", ref: DeploymentRef): string {
    return `deployment-${kind}:${encode(ref.model)}:${ref.index}`;
  }

  /** Counts one failure in a window that starts with the first; returns the count in the window. */
  async failed(ref: DeploymentRef, windowMs: number): Promise<number> {
    return (await this.#store.atomic.increment(this.#key("failures", ref), 1, windowMs)).value;
  }

  /**
   * Starts a cooldown until `until` (epoch ms) unless one runs already, and forgets the failures
   * that caused it. Returns the cooldown's end, this one or the running one's.
   */
  async coolDown(ref: DeploymentRef, until: number, now = Date.now()): Promise<number> {
    const { atomic } = this.#store;
    const key = this.#key("cooldown", ref);
    const started = await atomic.setIfAbsent(key, String(until), Math.max(1, until - now));
    await atomic.delete(this.#key("failures", ref));
    if (started) return until;
    return Number(await atomic.get(key)) || until;
  }

  /** The end of the deployment's cooldown (epoch ms), or 0 when it is not cooling down. */
  async cooldownUntil(ref: DeploymentRef, now = Date.now()): Promise<number> {
    const until = Number(await this.#store.atomic.get(this.#key("cooldown", ref)));
    return Number.isFinite(until) && until > now ? until : 0;
  }

  /** Counts a request against the deployment's minute; returns the count including it. */
  async countRequest(ref: DeploymentRef, windowMs: number): Promise<number> {
    return (await this.#store.atomic.increment(this.#key("rpm", ref), 1, windowMs)).value;
  }

  /** Tokens counted in the deployment's current minute. */
  tokens(ref: DeploymentRef): Promise<number> {
    return this.#store.atomic.counter(this.#key("tpm", ref));
  }

  async countTokens(ref: DeploymentRef, tokens: number, windowMs: number): Promise<void> {
    if (tokens > 0) await this.#store.atomic.increment(this.#key("tpm", ref), tokens, windowMs);
  }
}
