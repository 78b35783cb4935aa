import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import type { Config } from "../config.js";
import type { CreditsRepo } from "../../storage/repos/credits.js";
import type { LedgerRepo } from "../../storage/repos/ledger.js";
import { placeHold, type Hold } from "./holds.js";
import type { Charge, Refusal } from "./charge.js";
import { MICRO_PER_CREDIT } from "./types.js";

/** What admission reads: the ledger, the balances, the hold lease. */
export interface AdmissionDeps {
  ledger: LedgerRepo;
  credits: CreditsRepo;
  config: Pick<Config, "HOLD_LEASE_SECONDS">;
}

/** The most a request may cost and use, computed by its caller from the model's prices and output cap. */
export interface Estimate {
  /** Credits in micro-credits (rpc/money/types.ts MICRO_PER_CREDIT): prompt at the input price plus the output cap at the output price. */
  maxCost: number;
  /** Tokens: the prompt plus the output cap. */
  tokens: number;
  /** What the prompt alone costs, in micro-credits, at the cheapest deployment that may answer: known before the model runs. */
  inputCost: number;
  /** The prompt's tokens (the service's count, rpc/chat/tokens.ts). */
  promptTokens: number;
}

/** rpmLimit and tpmLimit count per minute (docs/models-and-chat.md). */
const WINDOW_MS = 60_000;

const insufficientCredits = () => new ServiceError("INSUFFICIENT_CREDITS", "Insufficient credits", { type: "insufficient_quota" });

/** 402 on the credits line: docs/interface.md 7.2's message when the balance is spent, and why when it is not. */
const creditsRefused = ({ value, reason, remaining, known }: Refusal) =>
  value <= 0
    ? insufficientCredits()
    : reason === "prompt"
      ? new ServiceError(
          "INSUFFICIENT_CREDITS",
          `Insufficient credits: this request's prompt alone costs ${known} micro-credits, more than the ${remaining} left in the workspace's balance`,
          { type: "insufficient_quota" },
        )
      : new ServiceError(
          "INSUFFICIENT_CREDITS",
          "Insufficient credits: the rest of the workspace's balance is held by requests in flight",
          {
            type: "insufficient_quota",
          },
        );

/** " (N held by requests in flight)" when part of a limit is only held, not used. */
export function heldNote(held: number, unit: string): string {
  return held > 0 ? ` (${held} ${unit} held by requests in flight)` : "";
}

/** docs/interface.md 7.2: 402 before any model runs, on every Platform endpoint, when the balance is zero or below. */
export async function requireCredits(services: Pick<AdmissionDeps, "credits">, principal: Principal): Promise<void> {
  const balance = await services.credits.balance(principal.workspaceId!);
  if (balance <= 0) throw insufficientCredits();
}

function retryAfter(ttlMs: number): Record<string, string> {
  return { "Retry-After": String(Math.max(1, Math.ceil(ttlMs / 1000))) };
}

/**
 * The Platform API's accounts, admitted by the ledger's admission rule (storage/admission.ts:
 * admitted while what remains is above zero and the prompt's own cost fits in it, the hold its
 * worst case capped at what remains):
 * places one hold (rpc/money/holds.ts) for the most the request can cost (`estimate`: the
 * prompt at the input price plus `max_tokens` or the model's output cap at the output price)
 * on every account that limits it, in this order of refusal:
 * - the workspace's credits: 402 `Insufficient credits` once the balance, less what requests
 *   in flight hold, is zero or below (docs/interface.md 7.2, before any model runs), or is
 *   less than the prompt's cost (`Insufficient credits: this request's prompt alone costs …`);
 * - the key's spendLimit (credits, lifetime): 402 naming the spend limit;
 * - rpmLimit: requests per minute, counted at once and exact, 429;
 * - tpmLimit: tokens per minute, prompt + output cap held (capped), 429; a prompt larger than
 *   what is left of the minute is refused.
 * (The 429s carry Retry-After, which the Platform renderer drops: docs/interface.md 7.2.)
 * One atomic step, so N instances on one Redis together overshoot none of them by more than
 * one request's excess over its capped hold. The hold settles to the metered cost when the
 * request ends, however it ends.
 */
export function admitPlatformChat(services: AdmissionDeps, principal: Principal, estimate: Estimate): Promise<Hold> {
  const { ledger } = services;
  const key = principal.key;
  const { maxCost } = estimate;
  const cost = (_usage: unknown, cost: number) => cost;
  const charges: Charge[] = [
    // A free request still needs a positive balance (docs/interface.md 7.2: zero or below is 402): the rule admits only while something remains.
    {
      account: ledger.credits(principal.workspaceId!),
      amount: maxCost,
      known: estimate.inputCost,
      limit: 0,
      refuse: creditsRefused,
      used: cost,
    },
  ];
  if (key) {
    charges.push(
      key.spendLimit != null
        ? {
            account: ledger.keySpend(key.id),
            amount: maxCost,
            limit: key.spendLimit * MICRO_PER_CREDIT,
            known: estimate.inputCost,
            refuse: ({ held, reason, remaining, known }) =>
              new ServiceError(
                "INSUFFICIENT_CREDITS",
                reason === "prompt"
                  ? `This request's prompt alone costs ${known} micro-credits, more than the ${remaining} left of this API key's spend limit of ${key.spendLimit} credits`
                  : `This API key has reached its spend limit of ${key.spendLimit} credits${heldNote(held, "micro-credits")}`,
                { type: "insufficient_quota" },
              ),
            used: cost,
          }
        : { account: ledger.keySpend(key.id), amount: 0, track: true, used: cost },
    );
    if (key.rpmLimit != null) {
      const limit = key.rpmLimit;
      charges.push({
        account: ledger.keyRequests(key.id, WINDOW_MS),
        amount: 1,
        limit,
        commit: true,
        refuse: ({ ttlMs }) =>
          new ServiceError("RATE_LIMITED", `Rate limit reached for this API key: ${limit} requests per minute`, {
            headers: retryAfter(ttlMs),
          }),
      });
    }
    if (key.tpmLimit != null) {
      const limit = key.tpmLimit;
      charges.push({
        account: ledger.keyTokens(key.id, WINDOW_MS),
        amount: estimate.tokens,
        known: estimate.promptTokens,
        limit,
        refuse: ({ ttlMs, held, reason, remaining, known }) =>
          new ServiceError(
            "RATE_LIMITED",
            reason === "prompt"
              ? known > limit
                ? `This request's prompt of ${known} tokens is larger than this API key's limit of ${limit} tokens per minute`
                : `Rate limit reached for this API key: this request's prompt of ${known} tokens is more than the ${remaining} left of ${limit} tokens per minute`
              : `Rate limit reached for this API key: ${limit} tokens per minute${heldNote(held, "tokens")}`,
            { headers: retryAfter(ttlMs) },
          ),
        used: (usage) => usage.total_tokens,
      });
    }
  }
  return placeHold(services, charges);
}
