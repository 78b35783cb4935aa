import { ServiceError } from "../../errors.js";
import type { Embedder, EmbeddingResult } from "./embedder.js";
import { countInputTokens } from "./embedder.js";
import type { EmbeddingRequest } from "./request.js";
import { normalized } from "./vectors.js";

/** Dimensions of an echo embedding when the request asks for none. */
export const ECHO_DIMENSIONS = 256;

/** The most numbers one echo answer holds (inputs × dimensions): the built-in model is no way to make the service write gigabytes. */
export const ECHO_MAX_NUMBERS = 1_048_576;

// The word pieces of rpc/chat/tokens.ts, lowercased: the features of a text.
const TOKEN = /[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu;

/**
 * The built-in embedding model (docs/embeddings.md "The echo model"): no network, deterministic.
 * Each word piece of a text (each id of a token array) is hashed to one dimension and a sign
 * (feature hashing), and the sum is normalised to length 1: the same text always gives the same
 * vector, and texts that share words are closer than texts that do not, so a retrieval pipeline
 * can be tried end to end with nothing configured. Usage is the gateway's own token count.
 */
export class EchoEmbedder implements Embedder {
  async embed(request: EmbeddingRequest): Promise<EmbeddingResult> {
    const dimensions = request.dimensions ?? ECHO_DIMENSIONS;
    if (request.inputs.length * dimensions > ECHO_MAX_NUMBERS)
      throw new ServiceError(
        "VALIDATION_FAILED",
        `The echo model answers at most ${ECHO_MAX_NUMBERS} numbers per request (inputs × dimensions): send fewer inputs or dimensions`,
      );
    const vectors = request.inputs.map((input) =>
      echoVector(typeof input === "string" ? featuresOf(input) : input.map((token) => `#${token}`), dimensions),
    );
    return { vectors, promptTokens: countInputTokens(request) };
  }
}

function featuresOf(text: string): string[] {
  const features = text.toLowerCase().match(TOKEN);
  // A text of white space alone is one feature: itself.
  return features?.length ? features : [text];
}

/** The normalised sum of the features' hashed unit vectors. */
export function echoVector(features: readonly string[], dimensions: number): number[] {
  const vector: number[] = new Array<number>(dimensions).fill(0);
  for (const feature of features) {
    const hash = fnv1a(feature);
    // The sign from other bits of the hash than the index, so the two are independent.
    vector[hash % dimensions]! += Math.imul(hash, 0x9e3779b1) < 0 ? -1 : 1;
  }
  // Features that cancel out (possible in very few dimensions) still give a unit vector.
  if (!vector.some((value) => value !== 0)) vector[fnv1a(features.join(" ")) % dimensions] = 1;
  return normalized(vector);
}

/** FNV-1a, 32 bits, over the UTF-16 code units: small, fast and stable across versions. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
