import type { ServiceError } from "../errors.js";
import type { HoldRefusal } from "../../storage/atomic.js";
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
  amount: number;
  limit?: number;
  commit?: boolean;
  track?: boolean;
  /** The error a refusal on this account raises. */
  refuse?(refusal: HoldRefusal, amount: number): ServiceError;
  /** What the request really took from this account, from its metered usage and cost. */
  used?(usage: Usage, cost: number): number;
}
