import type { ServiceError } from "../errors.js";
import type { HoldRefusal } from "../../storage/atomic.js";
import type { RefusalReason } from "../../storage/admission.js";
import type { LedgerAccount } from "../../storage/repos/ledger.js";
import type { Usage } from "./types.js";

/**
 * One account a request draws on (docs/architecture.md "Money", docs/models-and-chat.md "Holds").
 * - held (default): `amount` is reserved before the model runs and settled to `used(…)`;
 * - `commit`: counted at once and never given back (requests per minute);
 * - `track`: not reserved, only counted when the request ends (an account without a limit).
 */
export interface Charge {
  account: LedgerAccount;
  /** The request's worst case: its prompt plus its output cap. */
  amount: number;
  /** What is known before the model runs (the prompt's cost or tokens): refused when it alone passes what remains. */
  known?: number;
  limit?: number;
  commit?: boolean;
  track?: boolean;
  /** The error a refusal on this account raises. */
  refuse?(refusal: Refusal, amount: number): ServiceError;
  /** What the request really took from this account, from its metered usage and cost. */
  used?(usage: Usage, cost: number): number;
}

/** A refused charge: the account's state, what remained of it, and why (storage/admission.ts `refusalReason`). */
export interface Refusal extends HoldRefusal {
  reason: RefusalReason;
  /** What remained of the limit (≤ 0 when spent). */
  remaining: number;
  /** The request's known cost on this account (its prompt), rounded as the ledger holds it. */
  known: number;
}
