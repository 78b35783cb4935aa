import type { Store } from "../store.js";

/** Where a workspace's balance lives (also an account of the ledger, storage/repos/ledger.ts). */
export const creditsKey = (workspaceId: string) => `credits:${workspaceId}`;

/**
 * Workspace credit balances in integer micro-credits (1 credit = 1,000,000). Every change is
 * one atomic operation, so concurrent requests on any number of instances neither lose nor
 * double a debit.
 */
export class CreditsRepo {
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
  }

  #key(workspaceId: string) {
    return creditsKey(workspaceId);
  }

  balance(workspaceId: string): Promise<number> {
    return this.#store.atomic.balance(this.#key(workspaceId));
  }

  /** Adds credits (admin grant); returns the new balance. */
  grant(workspaceId: string, microCredits: number): Promise<number> {
    return this.#store.atomic.adjust(this.#key(workspaceId), Math.trunc(microCredits));
  }

  /** Charges metered usage. Usage already happened, so the balance may go below zero. */
  charge(workspaceId: string, microCredits: number): Promise<number> {
    return this.#store.atomic.adjust(this.#key(workspaceId), -Math.trunc(microCredits));
  }
}
