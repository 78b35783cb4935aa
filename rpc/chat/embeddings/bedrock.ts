import { bedrockEmbeddingFormat, type BedrockModelConfig } from "../models-config.js";
import { bedrockCredentials, bedrockSigner, signedPost } from "../providers/bedrock.js";
import { ProviderError } from "../providers/provider-error.js";
import { invalidAnswer, readJson, trimSlash } from "../providers/shared.js";
import { batches, textsOnly, type Embedder, type EmbeddingResult } from "./embedder.js";
import type { EmbeddingRequest } from "./request.js";

export interface BedrockEmbedderOptions {
  id: string;
  config: BedrockModelConfig;
  timeoutSeconds: number;
  env: Record<string, string | undefined>;
}

/** Texts one Cohere Embed call takes on Bedrock. */
const COHERE_BATCH = 96;
/** Titan embeds one text per call: this many calls of one request run at once. */
const TITAN_PARALLEL = 4;
/** Bedrock's count of the input tokens of an InvokeModel call (not sent for every model). */
const INPUT_TOKENS_HEADER = "x-amzn-bedrock-input-token-count";

/** What one InvokeModel call gave: vectors in order, and the input tokens when Bedrock said. */
interface Invoked {
  vectors: number[][];
  tokens?: number;
}

/**
 * Amazon Bedrock's InvokeModel (docs/embeddings.md "Providers"):
 * `POST <endpoint>/model/<modelId>/invoke`, signed with SigV4 (service `bedrock`) from the
 * standard AWS environment variables as the chat adapter signs (rpc/chat/providers/bedrock.ts).
 * The body is the model's own: Titan Text Embeddings takes one text per call (`inputText`,
 * `dimensions`; its vectors come normalised), so a request of several inputs is several calls;
 * Cohere Embed takes up to 96 `texts` per call with an `input_type` (the client's `input_type`,
 * else `search_document`) and `output_dimension` for `dimensions`. The input tokens are Titan's
 * `inputTextTokenCount`, else Bedrock's `X-Amzn-Bedrock-Input-Token-Count` header, else counted
 * by the gateway.
 */
export class BedrockEmbedder implements Embedder {
  readonly #options: BedrockEmbedderOptions;

  constructor(options: BedrockEmbedderOptions) {
    this.#options = options;
  }

  async embed(request: EmbeddingRequest, signal: AbortSignal, trace: { traceparent?: string } = {}): Promise<EmbeddingResult> {
    const { config, id } = this.#options;
    const texts = textsOnly(request, id);
    const modelId = config.upstreamModel ?? id;
    const invoke = this.#invoker(modelId, signal, trace);
    const calls =
      bedrockEmbeddingFormat(modelId) === "cohere"
        ? batches(texts, COHERE_BATCH).map(
            (batch) => () => invoke(cohereBody(batch, request), (answer) => cohereVectors(answer, batch.length)),
          )
        : texts.map((text) => () => invoke(titanBody(text, request), titanVectors));
    const results = await inOrder(calls, TITAN_PARALLEL);
    const vectors = results.flatMap((result) => result.vectors);
    const counted = results.every((result) => result.tokens !== undefined);
    return { vectors, ...(counted ? { promptTokens: results.reduce((sum, result) => sum + result.tokens!, 0) } : {}) };
  }

  /** One signed InvokeModel call of this model, its answer read by `read`. */
  #invoker(modelId: string, signal: AbortSignal, trace: { traceparent?: string }) {
    const { config, id, env } = this.#options;
    const timeoutMs = (config.timeoutSeconds ?? this.#options.timeoutSeconds) * 1000;
    const credentials = bedrockCredentials(env);
    if (!credentials)
      throw new ProviderError("UNAVAILABLE", `Embeddings not configured: model ${id} needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`, {
        retryable: false,
      });
    const region = config.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
    if (!region)
      throw new ProviderError("UNAVAILABLE", `Embeddings not configured: model ${id} needs a region (region or AWS_REGION)`, {
        retryable: false,
      });
    const base = new URL(trimSlash(config.baseURL ?? `https://bedrock-runtime.${region}.amazonaws.com`));
    const path = `${base.pathname.replace(/\/+$/, "")}/model/${encodeURIComponent(modelId)}/invoke`;
    const signer = bedrockSigner(region, credentials);
    return async (payload: Record<string, unknown>, read: (answer: unknown) => Invoked | undefined): Promise<Invoked> => {
      const body = JSON.stringify(payload);
      const headers = { host: base.host, "content-type": "application/json", accept: "application/json" };
      const response = await signedPost(signer, base, path, { id, headers, body, signal, timeoutMs, traceparent: trace.traceparent });
      const header = Number(response.headers[INPUT_TOKENS_HEADER]);
      const invoked = read(await readJson<unknown>(response, timeoutMs, id));
      if (!invoked) throw invalidAnswer(id);
      if (invoked.tokens === undefined && Number.isInteger(header) && header >= 0) invoked.tokens = header;
      return invoked;
    };
  }
}

function titanBody(text: string, request: EmbeddingRequest): Record<string, unknown> {
  return { inputText: text, ...(request.dimensions !== undefined ? { dimensions: request.dimensions } : {}) };
}

function titanVectors(answer: unknown): Invoked | undefined {
  const { embedding, inputTextTokenCount } = (answer ?? {}) as { embedding?: unknown; inputTextTokenCount?: unknown };
  if (!isVector(embedding)) return undefined;
  return { vectors: [embedding], ...(typeof inputTextTokenCount === "number" ? { tokens: inputTextTokenCount } : {}) };
}

function cohereBody(texts: string[], request: EmbeddingRequest): Record<string, unknown> {
  const inputType = typeof request.body.input_type === "string" ? request.body.input_type : "search_document";
  return { texts, input_type: inputType, ...(request.dimensions !== undefined ? { output_dimension: request.dimensions } : {}) };
}

/** `embeddings` is a list of vectors, or (when types were asked for) `{float: [...]}`. */
function cohereVectors(answer: unknown, count: number): Invoked | undefined {
  const { embeddings, meta } = (answer ?? {}) as { embeddings?: unknown; meta?: { billed_units?: { input_tokens?: unknown } } };
  const list = Array.isArray(embeddings) ? embeddings : (embeddings as { float?: unknown } | undefined)?.float;
  if (!Array.isArray(list) || list.length !== count || !list.every(isVector)) return undefined;
  const billed = meta?.billed_units?.input_tokens;
  return { vectors: list, ...(typeof billed === "number" ? { tokens: billed } : {}) };
}

function isVector(value: unknown): value is number[] {
  return Array.isArray(value) && value.every((item) => typeof item === "number");
}

/** Runs the calls, at most `parallel` at once, and gives their results in the calls' order; the first failure stops the rest. */
async function inOrder<T>(calls: (() => Promise<T>)[], parallel: number): Promise<T[]> {
  const results = new Array<T>(calls.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (next < calls.length && !failed) {
      const index = next++;
      try {
        results[index] = await calls[index]!();
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, calls.length) }, worker));
  return results;
}
