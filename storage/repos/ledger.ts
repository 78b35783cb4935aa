import { randomBytes } from "node:crypto";
import type { AccountState, HoldRefusal } from "../atomic.js";
import type { Store } from "../store.js";
import { creditsKey } from "./credits.js";

/**
 * One account of the ledger (docs/architecture.md "Money"): where its value lives and how it is counted.
 * `balance`: what is left (credits); `usage`: what was used against a limit.
 */
export interface LedgerAccount {
  readonly key: string;
  readonly kind: "balance" | "usage";
  /** A usage counted per window of this length (starting when the account is first touched). */
  readonly windowMs?: number;
}

export interface LedgerHoldLine {
  account: LedgerAccount;
  /** The most the request can take from this account; held capped at what remains (storage/admission.ts). */
  amount: number;
  /** What is known of its cost before the model runs (the prompt): refused when this alone passes what remains. */
  known?: number;
  /** balance: the floor (0 when absent); usage: the cap (none: not limited, only recorded). */
  limit?: number;
  /** Counted at once and never given back (requests per minute). */
  commit?: boolean;
}

export interface LedgerSettleLine {
  account: LedgerAccount;
  /** What the request really used on this account (≥ 0): taken from a balance, added to a usage. */
  used: number;
  /** False when the hold placed nothing on it (an account only counted when the request ends). */
  held?: boolean;
}

/**
 * Every account that limits spending — workspace credits, a key's spend, requests and
 * tokens per minute, a user's plan allowance, a tenant's tokens this month — and the holds
 * placed on them. The key schemes live here; callers name accounts, never keys.
 */
export class LedgerRepo {
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
  }

  credits(workspaceId: string): LedgerAccount {
    return { key: creditsKey(workspaceId), kind: "balance" };
  }

  /** Micro-credits a platform key has spent over its lifetime. */
  keySpend(keyId: string): LedgerAccount {
    return { key: `key-spend:${keyId}`, kind: "usage" };
  }

  keyRequests(keyId: string, windowMs: number): LedgerAccount {
    return { key: `key-rpm:${keyId}`, kind: "usage", windowMs };
  }

  keyTokens(keyId: string, windowMs: number): LedgerAccount {
    return { key: `key-tpm:${keyId}`, kind: "usage", windowMs };
  }

  planTokens(userId: string, windowMs: number): LedgerAccount {
    return { key: `plan-usage:${userId}`, kind: "usage", windowMs };
  }

  /** `month` is `YYYY-MM` (UTC). */
  tenantTokens(tenantId: string, month: string): LedgerAccount {
    return { key: `tenant-tokens:${tenantId}:${month}`, kind: "usage" };
  }

  newHoldId(): string {
    return `hold_${holdIdBytes().toString("base64url")}`;
  }

  /**
   * Places hold `id` on every line or on none (null: admitted), by the admission rule of
   * storage/admission.ts: a line is admitted while what remains of it is above zero and its
   * known cost (the prompt) fits in what remains.
   */
  hold(id: string, lines: LedgerHoldLine[], leaseMs: number): Promise<HoldRefusal | null> {
    return this.#store.atomic.hold(
      id,
      lines.map(({ account, amount, known, limit, commit }) => ({
        key: account.key,
        kind: account.kind,
        amount: Math.max(0, Math.ceil(amount)),
        ...(known ? { known: Math.min(Math.max(0, Math.ceil(amount)), Math.max(0, Math.ceil(known))) } : {}),
        ...(limit !== undefined ? { limit: Math.floor(limit) } : {}),
        ...(account.windowMs ? { windowMs: account.windowMs } : {}),
        ...(commit ? { commit } : {}),
      })),
      leaseMs,
    );
  }

  /**
   * Ends hold `id`: releases it and counts what was used, on every line at once, with the
   * request's metering `counters` (storage/repos/usage.ts `counters`) in the same step.
   */
  settle(id: string, lines: LedgerSettleLine[], counters?: [key: string, delta: number][]): Promise<void> {
    return this.#store.atomic.settle(
      id,
      lines.map(({ account, used, held }) => {
        const amount = Math.max(0, Math.ceil(used));
        return {
          key: account.key,
          delta: account.kind === "balance" ? -amount : amount,
          ...(account.windowMs ? { windowMs: account.windowMs } : {}),
          ...(held === false ? { held } : {}),
        };
      }),
      counters,
    );
  }

  renew(id: string, accounts: LedgerAccount[], leaseMs: number): Promise<void> {
    return this.#store.atomic.renew(
      id,
      accounts.map((account) => account.key),
      leaseMs,
    );
  }

  state(account: LedgerAccount): Promise<AccountState> {
    return this.#store.atomic.account(account.key);
  }
}

/**
 * 9 random bytes per hold id, cut from a pool filled 256 ids at a time: one `getrandom` per
 * 256 requests rather than one per request (as `randomUUID` does internally).
 */
const HOLD_ID_BYTES = 9;
let pool = Buffer.alloc(0);
let offset = 0;
function holdIdBytes(): Buffer {
  if (offset + HOLD_ID_BYTES > pool.length) {
    pool = randomBytes(HOLD_ID_BYTES * 256);
    offset = 0;
  }
  const bytes = pool.subarray(offset, offset + HOLD_ID_BYTES);
  offset += HOLD_ID_BYTES;
  return bytes;
}
