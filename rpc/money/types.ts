/** Tokens a model turn used, as OpenAI's `usage` has them (the unit every token account counts). */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** One millionth of a credit: the ledger's unit for credits and key spend (docs/billing.md). */
export const MICRO_PER_CREDIT = 1_000_000;
