import { Collection } from "../collection.js";
import type { Store } from "../store.js";

export type Channel = "stable" | "beta" | "canary";

/** A published component release (issue 12; docs/updates.md). */
export interface Release {
  component: string;
  /** SemVer 2.0, as published (build metadata kept). */
  version: string;
  channel: Channel;
  notes: string;
  url: string;
  sha256: string;
  size: number;
  minimumVersion?: string;
  mandatory: boolean;
  publishedAt: string;
  publishedBy: string;
}

export type RolloutState = "active" | "paused" | "rolled_back";

/** How far a release is offered: `percentage` of clients once `startAt` has passed, while active. */
export interface Rollout {
  component: string;
  version: string;
  channel: Channel;
  percentage: number;
  state: RolloutState;
  startAt?: string;
  createdAt: string;
  updatedAt: string;
  updatedBy: string;
}

/** Versions carry `+` and other characters a key segment may not: they are stored encoded. */
const encode = (value: string) => Buffer.from(value).toString("base64url");

/**
 * Releases and their rollouts, keyed by component and version precedence (SemVer without the
 * build metadata, so `1.2.0+a` and `1.2.0+b` are the same release). Global: releases concern
 * components of the platform, not a tenant's data.
 */
export class ReleasesRepo {
  readonly #releases: Collection<Release>;
  readonly #rollouts: Collection<Rollout>;
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
    this.#releases = new Collection<Release>(store, "releases");
    this.#rollouts = new Collection<Rollout>(store, "rollouts");
  }

  /**
   * Claims a component and precedence for one publish (atomic, so two concurrent publishes of
   * the same version cannot both win). False when it was already claimed.
   */
  claim(component: string, precedence: string): Promise<boolean> {
    return this.#store.atomic.setIfAbsent(`release:${encode(component)}:${encode(precedence)}`, "1");
  }

  put(release: Release, precedence: string): Promise<Release> {
    return this.#releases.put([encode(release.component), encode(precedence)], release);
  }

  get(component: string, precedence: string): Promise<Release | null> {
    return this.#releases.get(encode(component), encode(precedence));
  }

  /** Every release of a component, or of all components. */
  list(component?: string): Promise<Release[]> {
    return component === undefined ? this.#releases.list() : this.#releases.list(encode(component));
  }

  getRollout(component: string, precedence: string): Promise<Rollout | null> {
    return this.#rollouts.get(encode(component), encode(precedence));
  }

  putRollout(rollout: Rollout, precedence: string): Promise<Rollout> {
    return this.#rollouts.put([encode(rollout.component), encode(precedence)], rollout);
  }

  listRollouts(component?: string): Promise<Rollout[]> {
    return component === undefined ? this.#rollouts.list() : this.#rollouts.list(encode(component));
  }
}
