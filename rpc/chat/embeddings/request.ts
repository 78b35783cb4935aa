import * as v from "valibot";

/**
 * The OpenAI embeddings request (docs/embeddings.md "The request"), read tolerantly: the fields
 * the gateway acts on are validated, every other field is kept and carried to an upstream that
 * speaks this format (`openai-compatible`, `azure-openai`) as the client sent it.
 */

/** Inputs one request may embed: OpenAI's own limit, so a client batching for OpenAI fits. */
export const MAX_INPUTS = 2048;

/** The most dimensions a request may ask for (the largest embedding models give 3,072 to 4,096). */
export const MAX_DIMENSIONS = 8192;

const Text = v.pipe(v.string(), v.minLength(1, "input must not contain an empty string"));
const Token = v.pipe(
  v.number("token ids are integers"),
  v.integer("token ids are integers"),
  v.minValue(0, "token ids are not negative"),
  v.maxValue(2 ** 31 - 1, "token ids are at most 2147483647"),
);
const Tokens = v.pipe(v.array(Token), v.minLength(1, "a token array must not be empty"));
const tooMany = `input has too many items: at most ${MAX_INPUTS} per request`;

const Input = v.union(
  [
    Text,
    v.pipe(v.array(Text), v.minLength(1), v.maxLength(MAX_INPUTS, tooMany)),
    Tokens,
    v.pipe(v.array(Tokens), v.minLength(1), v.maxLength(MAX_INPUTS, tooMany)),
  ],
  "input must be a non-empty string, or a non-empty array of strings, of token ids or of token id arrays",
);

export const EmbeddingsBody = v.looseObject(
  {
    model: v.pipe(v.string("model must be a string"), v.minLength(1, "model must not be empty")),
    input: Input,
    encoding_format: v.nullish(v.picklist(["float", "base64"], 'encoding_format must be "float" or "base64"')),
    dimensions: v.nullish(
      v.pipe(
        v.number("dimensions must be an integer"),
        v.integer("dimensions must be an integer"),
        v.minValue(1, "dimensions must be at least 1"),
        v.maxValue(MAX_DIMENSIONS, `dimensions must be at most ${MAX_DIMENSIONS}`),
      ),
    ),
    user: v.nullish(v.string("user must be a string")),
  },
  // A missing field is named: "model is required".
  (issue) => (issue.expected?.startsWith('"') ? `${issue.expected.slice(1, -1)} is required` : "the body must be a JSON object"),
);

export type EmbeddingsBodyInput = v.InferOutput<typeof EmbeddingsBody>;

/** The request as adapters take it: its inputs as a list, of texts or of token id arrays. */
export interface EmbeddingRequest {
  model: string;
  /** Texts, or token id arrays (`tokens: true`): one embedding each, in this order. */
  inputs: string[] | number[][];
  tokens: boolean;
  /** What the client gets: floats, or base64 of little-endian float32 (OpenAI's encoding). */
  encodingFormat: "float" | "base64";
  dimensions?: number;
  /** The client's body as it came (unknown fields included), for an upstream of the same format. */
  body: Record<string, unknown>;
}

export function toEmbeddingRequest(body: EmbeddingsBodyInput): EmbeddingRequest {
  const input = body.input;
  const list: unknown[] = typeof input === "string" ? [input] : typeof input[0] === "number" ? [input] : input;
  const request: EmbeddingRequest = {
    model: body.model,
    inputs: list as string[] | number[][],
    tokens: typeof list[0] !== "string",
    encodingFormat: body.encoding_format ?? "float",
    body,
  };
  if (body.dimensions != null) request.dimensions = body.dimensions;
  return request;
}

/** The answer (OpenAI's `CreateEmbeddingResponse`), whichever provider embedded. */
export const EmbeddingsView = v.object({
  object: v.literal("list"),
  data: v.array(
    v.object({
      object: v.literal("embedding"),
      index: v.number(),
      /** Floats, or base64 of little-endian float32 when `encoding_format` is `base64`. */
      embedding: v.union([v.array(v.number()), v.string()]),
    }),
  ),
  model: v.string(),
  usage: v.object({ prompt_tokens: v.number(), total_tokens: v.number() }),
});

export type EmbeddingsAnswer = v.InferOutput<typeof EmbeddingsView>;
