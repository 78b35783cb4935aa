/**
 * The admission rule of the ledger, the one place it is written (docs/billing.md
 * "Admission"). Every limited account — workspace credits, a key's spendLimit and tpmLimit, a
 * plan allowance, a tenant's tokensPerMonth — admits a request the same way:
 *
 * - **what remains** is the limit (or the balance) minus what is used and what requests in
 *   flight hold: `value − held − floor` for a balance, `limit − value − held` for a usage;
 * - a request is admitted while what remains is **above zero** and its **known cost** (the
 *   prompt, priced or counted before any model runs) fits in what remains;
 * - its hold is its worst case (the prompt plus the output cap), **capped at what remains**;
 *   the settlement later charges the metered cost, which may pass a capped hold;
 * - at most **one capped hold** is in flight per account: while one is, a request whose worst
 *   case does not fit whole is refused. So, however many requests run at once on however many
 *   instances, an account ends at most one request's excess over its capped hold past its
 *   limit (below zero for credits): every other hold in flight covers its worst case, and a
 *   capped hold covers at least its prompt, so the excess is at most one request's output.
 * - a count taken at once (`commit`: requests per minute) stays exact: admitted only when the
 *   whole amount fits.
 * - a usage account without a limit admits everything; the hold is still recorded.
 *
 * `admit` is the rule in TypeScript (LocalAtomic, memory and fs); `ADMIT_LUA` is the same rule
 * for the Redis scripts (storage/redis-atomic.ts). test/storage/ledger.property.test.ts checks
 * both against a model of it.
 */

export interface AdmissionLine {
  kind: "balance" | "usage";
  /** The request's worst case on this account (integer ≥ 0). */
  amount: number;
  /**
   * What is known of its cost before the model runs (its prompt; integer, 0 ≤ known ≤ amount):
   * refused when this alone passes what remains. Absent: 0.
   */
  known?: number;
  /** balance: the floor (0 when absent); usage: the cap (none: not limited). */
  limit?: number;
  /** Counted at once, never capped (requests per minute). */
  commit?: boolean;
}

/** What an admitted line holds: `amount` (≤ the worst case) and whether it was capped. */
export interface Admitted {
  amount: number;
  capped: boolean;
}

/**
 * Admits `line` on an account whose value is `value`, with `held` held by requests in flight,
 * `cappedInFlight` when one of them holds a capped hold. Null: refused.
 */
export function admit(line: AdmissionLine, value: number, held: number, cappedInFlight: boolean): Admitted | null {
  if (line.kind === "usage" && line.limit === undefined) return { amount: line.amount, capped: false };
  const remaining = remainingOf(line, value, held);
  if (line.commit) return line.amount <= remaining ? { amount: line.amount, capped: false } : null;
  if (remaining <= 0 || (line.known ?? 0) > remaining) return null;
  if (line.amount <= remaining) return { amount: line.amount, capped: false };
  if (cappedInFlight) return null;
  return { amount: remaining, capped: true };
}

/** Why a line was refused: its limit is `spent` (nothing remains), the `prompt` alone passes what remains, or what remains is `held` by a capped request in flight. */
export type RefusalReason = "spent" | "prompt" | "held";

/** What remains of an account for `line` (the same arithmetic as `admit`; Infinity without a limit). */
export function remainingOf(line: Pick<AdmissionLine, "kind" | "limit">, value: number, held: number): number {
  if (line.kind === "usage" && line.limit === undefined) return Number.POSITIVE_INFINITY;
  return line.kind === "balance" ? value - held - (line.limit ?? 0) : line.limit! - value - held;
}

/** Why `admit` refused `line` on an account in this state (a refused line's `value` and `held`). */
export function refusalReason(line: AdmissionLine, value: number, held: number): RefusalReason {
  const remaining = remainingOf(line, value, held);
  if (line.commit || remaining <= 0) return "spent";
  if ((line.known ?? 0) > remaining) return "prompt";
  return "held";
}

/**
 * The same rule in Lua: `admit(kind, amount, known, limit, commit, value, held, capped)` with kind
 * `'b'`/`'u'`, limit `''` for none, commit and capped `'1'`/`'0'` and booleans; returns the
 * amount to hold (−1: refused) and 1 when that hold is capped.
 */
export const ADMIT_LUA = `
local function admit(kind, amount, known, limit, commit, value, held, capped)
  if kind == 'u' and limit == '' then return amount, 0 end
  local remaining
  if kind == 'b' then remaining = value - held - tonumber(limit) else remaining = tonumber(limit) - value - held end
  if commit == '1' then
    if amount <= remaining then return amount, 0 end
    return -1, 0
  end
  if remaining <= 0 or known > remaining then return -1, 0 end
  if amount <= remaining then return amount, 0 end
  if capped then return -1, 0 end
  return remaining, 1
end`;
