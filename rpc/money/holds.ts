import type { LedgerRepo } from "../../storage/repos/ledger.js";
import type { Config } from "../config.js";
import type { LedgerHoldLine, LedgerSettleLine } from "../../storage/repos/ledger.js";
import type { Usage } from "./types.js";
import type { Charge } from "./charge.js";
import { refusalReason, remainingOf } from "../../storage/admission.js";

export interface Hold {
  /**
   * Settles every account to the metered usage and releases the rest, adding `counters` (the
   * request's metering) in the same step. Exactly once: later calls do nothing.
   */
  settle(usage: Usage, cost: number, counters?: [key: string, delta: number][]): Promise<void>;
  /** Releases the hold without charging (nothing ran). */
  release(): Promise<void>;
}

/**
 * Places one hold across every charge, atomically (one round trip on Redis), or throws the
 * first refused charge's error. While the request runs the hold's lease is renewed every half
 * lease, so only a process that died leaves a hold to expire.
 */
export async function placeHold(
  deps: { ledger: LedgerRepo; config: Pick<Config, "HOLD_LEASE_SECONDS"> },
  charges: Charge[],
): Promise<Hold> {
  const { ledger } = deps;
  const id = ledger.newHoldId();
  const leaseMs = deps.config.HOLD_LEASE_SECONDS * 1000;
  const held = charges.filter((charge) => !charge.track);
  const lines: LedgerHoldLine[] = held.map(({ account, amount, known, limit, commit }) => ({
    account,
    amount,
    ...(known ? { known } : {}),
    ...(limit !== undefined ? { limit } : {}),
    ...(commit ? { commit } : {}),
  }));
  const refusal = await ledger.hold(id, lines, leaseMs);
  if (refusal) {
    const charge = held[refusal.index]!;
    // Rounded as the ledger rounds them (storage/repos/ledger.ts).
    const line = {
      kind: charge.account.kind,
      amount: Math.ceil(charge.amount),
      known: Math.min(Math.ceil(charge.amount), Math.ceil(charge.known ?? 0)),
      ...(charge.limit !== undefined ? { limit: Math.floor(charge.limit) } : {}),
      ...(charge.commit ? { commit: true } : {}),
    };
    throw charge.refuse!(
      {
        ...refusal,
        reason: refusalReason(line, refusal.value, refusal.held),
        remaining: remainingOf(line, refusal.value, refusal.held),
        known: line.known,
      },
      line.amount,
    );
  }
  const open = charges.filter((charge) => !charge.commit);
  const renewed = open.filter((charge) => !charge.track).map((charge) => charge.account);
  const timer = renewed.length ? setInterval(() => void ledger.renew(id, renewed, leaseMs).catch(() => undefined), leaseMs / 2) : undefined;
  timer?.unref();
  let done = false;
  const end = async (lines: LedgerSettleLine[], counters?: [key: string, delta: number][]) => {
    if (done) return;
    done = true;
    if (timer) clearInterval(timer);
    await ledger.settle(id, lines, counters);
  };
  return {
    settle: (usage, cost, counters) =>
      end(
        open.map((charge) => ({
          account: charge.account,
          used: charge.used?.(usage, cost) ?? 0,
          ...(charge.track ? { held: false } : {}),
        })),
        counters,
      ),
    release: () => end(open.filter((charge) => !charge.track).map((charge) => ({ account: charge.account, used: 0 }))),
  };
}
