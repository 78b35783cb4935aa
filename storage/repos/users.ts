import { Collection } from "../collection.js";
import type { Store } from "../store.js";
import { sha256Hex } from "../ids.js";

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

  constructor(store: Store) {
    this.#store = store;
    this.#users = new Collection<User>(store.kv, "users");
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

  put(user: User): Promise<User> {
    return this.#users.put([user.id], user);
  }

  /** Removes a user record nothing points to (a registration that lost its email claim). */
  remove(user: User): Promise<void> {
    return this.#users.remove(user.id);
  }
}
