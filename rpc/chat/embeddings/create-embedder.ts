import type { SingleModelConfig } from "../models-config.js";
import { BedrockEmbedder } from "./bedrock.js";
import { EchoEmbedder } from "./echo.js";
import type { Embedder } from "./embedder.js";
import { GeminiEmbedder } from "./gemini.js";
import { OpenAiEmbedder } from "./openai.js";

export interface EmbedderOptions {
  /** The model's timeout (MODEL_TIMEOUT_SECONDS unless the model sets its own). */
  timeoutSeconds: number;
  /** The environment keys and AWS credentials are read from, at request time. */
  env: Record<string, string | undefined>;
}

/** The embeddings adapter of one deployment of an embedding model (models-config.ts checked its provider at start). */
export function createEmbedder(id: string, config: SingleModelConfig, options: EmbedderOptions): Embedder {
  const { timeoutSeconds, env } = options;
  switch (config.provider) {
    case "echo":
      return new EchoEmbedder();
    case "openai-compatible":
    case "azure-openai":
      return new OpenAiEmbedder({ id, config, timeoutSeconds, env });
    case "gemini":
      return new GeminiEmbedder({ id, config, timeoutSeconds, env });
    case "bedrock":
      return new BedrockEmbedder({ id, config, timeoutSeconds, env });
    case "anthropic":
      throw new Error(`models.${id}: anthropic has no embeddings API`);
  }
}
