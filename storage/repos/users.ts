import { Collection } from "../collection.js";
import type { Store } from "../store.js";
import { sha256Hex } from "../ids.js";
import { BusCache } from "../bus-cache.js";
import { KEY_CACHE_MS } from "./keys.js";

export interface User {
  id: string;
  email: string;
  fullName: string;
  passwordHash: string;
  tenantId: string;
  workspaceId: string;
  plan: string;
  /** Set by `npm run admin -- grant-operator`: may publish releases and edit the model registry. */
  operator?: boolean;
  createdAt: string;
}

export class UsersRepo {
  readonly #users: Collection<User>;
  readonly #store: Store;
  /** Users as the chat path reads them (plan, tenant), dropped everywhere on change. */
  readonly #cached: BusCache<User>;

  constructor(store: Store, options: { cacheMs?: number } = {}) {
    this.#store = store;
    this.#users = new Collection<User>(store, "users");
    this.#cached = new BusCache<User>(store.bus, "users.changed", { ttlMs: options.cacheMs ?? KEY_CACHE_MS });
  }

  static normalizeEmail(email: string): string {
    return email.trim().toLowerCase();
  }

  #emailKey(email: string) {
    return `email:${sha256Hex(UsersRepo.normalizeEmail(email))}`;
  }

  /**
   * Claims the email for `userId` (whose record is already written); false when another
   * user holds it. A claim whose user record does not exist — left by a registration that
   * claimed first and was killed before writing the user, as older versions did — is taken
   * over, atomically.
   */
  async claimEmail(email: string, userId: string): Promise<boolean> {
    const key = this.#emailKey(email);
    if (await this.#store.atomic.setIfAbsent(key, userId)) return true;
    const holder = await this.#store.atomic.get(key);
    if (holder === null) return this.#store.atomic.setIfAbsent(key, userId);
    if (holder === userId) return true;
    if (await this.get(holder)) return false;
    if (await this.#store.atomic.compareAndSet(key, holder, userId)) return true;
    return (await this.#store.atomic.get(key)) === userId;
  }

  releaseEmail(email: string, userId: string): Promise<boolean> {
    return this.#store.atomic.compareAndSet(this.#emailKey(email), userId, null);
  }

  async byEmail(email: string): Promise<User | null> {
    const id = await this.#store.atomic.get(this.#emailKey(email));
    return id ? this.get(id) : null;
  }

  get(id: string): Promise<User | null> {
    return Collection.validId(id) ? this.#users.get(id) : Promise.resolve(null);
  }

  /** The user from the short cache (storage/bus-cache.ts): for reads on every request (plan, tenant). */
  recent(id: string): Promise<User | null> {
    return Collection.validId(id) ? this.#cached.get(id, () => this.#users.get(id)) : Promise.resolve(null);
  }

  async put(user: User): Promise<User> {
    const stored = await this.#users.put([user.id], user);
    await this.#cached.invalidate(user.id);
    return stored;
  }

  /** Removes a user record nothing points to (a registration that lost its email claim). */
  async remove(user: User): Promise<void> {
    await this.#users.remove(user.id);
    await this.#cached.invalidate(user.id);
  }
}
