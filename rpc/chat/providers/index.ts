import type { SingleModelConfig as ModelConfig } from "../models-config.js";
import type { Provider } from "../types.js";
import { ANTHROPIC_VERSION, AnthropicProvider } from "./anthropic.js";
import { BedrockProvider, bedrockCredentials } from "./bedrock.js";
import { EchoProvider } from "./echo.js";
import { GeminiProvider } from "./gemini.js";
import { OpenAiCompatibleProvider } from "./openai-compatible.js";
import { trimSlash } from "./shared.js";

export interface ProviderOptions {
  /** MODEL_TIMEOUT_SECONDS, unless the model sets its own. */
  timeoutSeconds: number;
  /** The environment keys and AWS credentials are read from, at request time. */
  env: Record<string, string | undefined>;
}

/** The adapter for one model entry (docs/providers.md). */
export function createProvider(id: string, config: ModelConfig, options: ProviderOptions): Provider {
  const { timeoutSeconds, env } = options;
  switch (config.provider) {
    case "echo":
      return new EchoProvider(id);
    case "openai-compatible":
    case "azure-openai":
      return new OpenAiCompatibleProvider({ id, config, timeoutSeconds, env });
    case "anthropic":
      return new AnthropicProvider({ id, config, timeoutSeconds, env });
    case "gemini":
      return new GeminiProvider({ id, config, timeoutSeconds, env });
    case "bedrock":
      return new BedrockProvider({ id, config, timeoutSeconds, env });
  }
}

/**
 * The model registry's active check (docs/model-registry.md): a cheap GET that costs no tokens
 * (each provider's model listing or model lookup), or why there is none: `missing` names an
 * unset variable, `skip` a provider without such a call (Bedrock's listing is on another
 * service; its health is the passive one).
 */
export type ProbeTarget = { url: string; headers: Record<string, string> } | { missing: string } | { skip: string };

export function probeTarget(id: string, config: ModelConfig, env: Record<string, string | undefined>): ProbeTarget | undefined {
  if (config.provider === "echo") return undefined;
  if (config.provider === "bedrock") {
    const credentials = bedrockCredentials(env);
    return credentials ? { skip: "no probe for bedrock" } : { missing: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" };
  }
  const apiKey = config.apiKeyEnv ? env[config.apiKeyEnv] : undefined;
  if (config.apiKeyEnv && !apiKey) return { missing: config.apiKeyEnv };
  const base = trimSlash(config.baseURL);
  switch (config.provider) {
    case "openai-compatible":
      return { url: `${base}/models`, headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} };
    case "azure-openai":
      return {
        url: `${base}/openai/models?api-version=${encodeURIComponent(config.apiVersion)}`,
        headers: apiKey ? { "api-key": apiKey } : {},
      };
    case "anthropic":
      return { url: `${base}/v1/models`, headers: { "anthropic-version": ANTHROPIC_VERSION, ...(apiKey ? { "x-api-key": apiKey } : {}) } };
    case "gemini":
      return {
        url: `${base}/models/${encodeURIComponent(config.upstreamModel ?? id)}`,
        headers: apiKey ? { "x-goog-api-key": apiKey } : {},
      };
  }
}
