import type { GeminiModelConfig } from "../models-config.js";
import { apiKeyOf, invalidAnswer, post, readJson, trimSlash } from "../providers/shared.js";
import { batches, textsOnly, type Embedder, type EmbeddingResult } from "./embedder.js";
import type { EmbeddingRequest } from "./request.js";
import { normalized } from "./vectors.js";

export interface GeminiEmbedderOptions {
  id: string;
  config: GeminiModelConfig;
  timeoutSeconds: number;
  env: Record<string, string | undefined>;
}

/** Requests one `batchEmbedContents` call takes (the Gemini API refuses more). */
const GEMINI_BATCH = 100;

interface GeminiEmbeddings {
  embeddings?: { values?: unknown }[];
  usageMetadata?: { promptTokenCount?: unknown };
}

/**
 * Google's Generative Language API (docs/embeddings.md "Providers"):
 * `POST <baseURL>/models/<model>:batchEmbedContents`, the key in `x-goog-api-key`, one
 * `EmbedContentRequest` per input (`content.parts[].text`), at most 100 per call (more inputs
 * are sent in several calls, in order). `dimensions` is `outputDimensionality`; Gemini
 * normalises only its full-size vectors, so a vector cut to fewer dimensions is normalised
 * here, as OpenAI's are. A client's `task_type` (Gemini's `TaskType`, e.g. `RETRIEVAL_QUERY`) is
 * passed as `taskType`. Gemini reports no usage for embeddings: the gateway counts the tokens
 * (a `usageMetadata.promptTokenCount`, when a response carries one, is used instead).
 */
export class GeminiEmbedder implements Embedder {
  readonly #options: GeminiEmbedderOptions;

  constructor(options: GeminiEmbedderOptions) {
    this.#options = options;
  }

  async embed(request: EmbeddingRequest, signal: AbortSignal, trace: { traceparent?: string } = {}): Promise<EmbeddingResult> {
    const { config, id, env } = this.#options;
    const texts = textsOnly(request, id);
    const timeoutMs = (config.timeoutSeconds ?? this.#options.timeoutSeconds) * 1000;
    const apiKey = apiKeyOf(config.apiKeyEnv, env, id);
    const model = config.upstreamModel ?? id;
    const url = `${trimSlash(config.baseURL)}/models/${encodeURIComponent(model)}:batchEmbedContents`;
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    if (apiKey) headers["x-goog-api-key"] = apiKey;
    const taskType = typeof request.body.task_type === "string" ? request.body.task_type : undefined;
    const vectors: unknown[] = [];
    let promptTokens: number | undefined = 0;
    for (const batch of batches(texts, GEMINI_BATCH)) {
      const body = {
        requests: batch.map((text) => ({
          model: `models/${model}`,
          content: { parts: [{ text }] },
          ...(taskType ? { taskType } : {}),
          ...(request.dimensions !== undefined ? { outputDimensionality: request.dimensions } : {}),
        })),
      };
      const response = await post({ id, url, headers, body: JSON.stringify(body), signal, timeoutMs, traceparent: trace.traceparent });
      const answer = await readJson<GeminiEmbeddings>(response, timeoutMs, id);
      const embeddings = answer?.embeddings;
      if (!Array.isArray(embeddings) || embeddings.length !== batch.length) throw invalidAnswer(id);
      for (const embedding of embeddings) {
        const values = embedding?.values;
        if (!Array.isArray(values) || !values.every((value) => typeof value === "number")) throw invalidAnswer(id);
        vectors.push(request.dimensions !== undefined ? normalized(values) : values);
      }
      const counted = answer.usageMetadata?.promptTokenCount;
      promptTokens = typeof counted === "number" && promptTokens !== undefined ? promptTokens + counted : undefined;
    }
    return { vectors, ...(promptTokens !== undefined ? { promptTokens } : {}) };
  }
}
