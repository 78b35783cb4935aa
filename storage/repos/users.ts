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

  /** Claims the email for `userId`; false when another user holds it. */
  claimEmail(email: string, userId: string): Promise<boolean> {
    return this.#store.atomic.setIfAbsent(this.#emailKey(email), userId);
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
}
