import { ServiceError } from "../../errors.js";
import { countTokens } from "../tokens.js";
import type { EmbeddingRequest } from "./request.js";

/** What a provider answers: one vector per input, in order, and the tokens it counted. */
export interface EmbeddingResult {
  /**
   * Numbers, or base64 text when an upstream of the OpenAI format was asked for base64 (the
   * caller converts each to the format the client asked for, rpc/chat/embeddings/vectors.ts).
   */
  vectors: unknown[];
  /** Prompt tokens the provider reported; absent when it reports none (the gateway counts them). */
  promptTokens?: number;
}

/** One deployment's embeddings adapter (docs/embeddings.md "Providers"). */
export interface Embedder {
  embed(request: EmbeddingRequest, signal: AbortSignal, trace?: { traceparent?: string }): Promise<EmbeddingResult>;
}

/**
 * The tokens of the inputs as the gateway counts them (rpc/chat/tokens.ts): what a hold
 * reserves, and what is billed when the provider reports no usage. A token id array is its
 * length.
 */
export function countInputTokens(request: Pick<EmbeddingRequest, "inputs">): number {
  let total = 0;
  for (const input of request.inputs) total += typeof input === "string" ? countTokens(input) : input.length;
  return total;
}

/** Providers whose API takes text only: token id arrays are refused before anything is sent. */
export function textsOnly(request: EmbeddingRequest, id: string): string[] {
  if (request.tokens)
    throw new ServiceError("VALIDATION_FAILED", `The model '${id}' embeds text only: input must be strings, not token ids`, {
      details: { issues: [{ path: "input", message: "token ids are not accepted by this model's provider" }] },
    });
  return request.inputs as string[];
}

/** `items` in batches of at most `size`. */
export function batches<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
