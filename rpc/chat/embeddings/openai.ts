import type { AzureModelConfig, OpenAiModelConfig } from "../models-config.js";
import { apiKeyOf, invalidAnswer, post, readJson, trimSlash } from "../providers/shared.js";
import type { Embedder, EmbeddingResult } from "./embedder.js";
import type { EmbeddingRequest } from "./request.js";

export interface OpenAiEmbedderOptions {
  id: string;
  config: OpenAiModelConfig | AzureModelConfig;
  timeoutSeconds: number;
  env: Record<string, string | undefined>;
}

interface OpenAiEmbeddings {
  data?: { index?: unknown; embedding?: unknown }[];
  usage?: { prompt_tokens?: unknown };
}

/** Fields the gateway reads that a client may send as null: left out upstream, as the client meant. */
const NULLABLE = ["encoding_format", "dimensions", "user"] as const;

/**
 * An upstream speaking OpenAI's embeddings format (docs/embeddings.md "Providers"):
 * `openai-compatible` at `<baseURL>/embeddings` with a bearer key, `azure-openai` at
 * `<baseURL>/openai/deployments/<deployment>/embeddings?api-version=…` with the key in
 * `api-key`. The client's body goes as it came, every field the gateway does not read included
 * (`encoding_format` too, so base64 vectors pass through undecoded), with the model replaced by
 * the upstream's.
 */
export class OpenAiEmbedder implements Embedder {
  readonly #options: OpenAiEmbedderOptions;

  constructor(options: OpenAiEmbedderOptions) {
    this.#options = options;
  }

  async embed(request: EmbeddingRequest, signal: AbortSignal, trace: { traceparent?: string } = {}): Promise<EmbeddingResult> {
    const { config, id, env } = this.#options;
    const timeoutMs = (config.timeoutSeconds ?? this.#options.timeoutSeconds) * 1000;
    const apiKey = apiKeyOf(config.apiKeyEnv, env, id);
    const upstreamModel = config.upstreamModel ?? id;
    const body: Record<string, unknown> = { ...request.body, model: upstreamModel };
    for (const field of NULLABLE) if (body[field] === null) delete body[field];
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    let url: string;
    if (config.provider === "azure-openai") {
      url = `${trimSlash(config.baseURL)}/openai/deployments/${encodeURIComponent(upstreamModel)}/embeddings?api-version=${encodeURIComponent(config.apiVersion)}`;
      if (apiKey) headers["api-key"] = apiKey;
    } else {
      url = `${trimSlash(config.baseURL)}/embeddings`;
      if (apiKey) headers.authorization = `Bearer ${apiKey}`;
    }
    const response = await post({ id, url, headers, body: JSON.stringify(body), signal, timeoutMs, traceparent: trace.traceparent });
    const answer = await readJson<OpenAiEmbeddings>(response, timeoutMs, id);
    const data = answer?.data;
    if (!Array.isArray(data) || data.length !== request.inputs.length) throw invalidAnswer(id);
    // By `index` when every item has one (OpenAI's order is the input's, but the index is the contract).
    const vectors = new Array<unknown>(data.length);
    const indexed = data.every(
      (item) => Number.isInteger(item?.index) && (item.index as number) >= 0 && (item.index as number) < data.length,
    );
    for (const [position, item] of data.entries()) vectors[indexed ? (item.index as number) : position] = item?.embedding;
    const prompt = answer.usage?.prompt_tokens;
    return { vectors, ...(typeof prompt === "number" && prompt >= 0 ? { promptTokens: prompt } : {}) };
  }
}
