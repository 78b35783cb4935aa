import { readFileSync } from "node:fs";
import * as v from "valibot";
import { ConfigError, type Config } from "../config.js";

/**
 * The models document (docs/models-and-chat.md): `{"models": {"<id>": <entry>}}`, read from
 * MODELS_FILE and MODELS_JSON at start. A bad document stops the start naming the problem.
 */
const Price = v.strictObject({
  /** Micro-credits per 1,000 prompt tokens. */
  input: v.pipe(v.number(), v.minValue(0)),
  /** Micro-credits per 1,000 completion tokens. */
  output: v.pipe(v.number(), v.minValue(0)),
});

const Common = {
  /** Shown as `owned_by` in the catalogs (spec 2.1). */
  ownedBy: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** Shown as `context_window` (spec 2.1). */
  contextWindow: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 8192),
  /** A listed model that is not public is refused with 403 (spec 2.1, 7.2). */
  public: v.optional(v.boolean(), true),
  price: v.optional(Price, { input: 1000, output: 2000 }),
  /**
   * Most completion tokens a request may produce when it sets no `max_tokens`: what a hold
   * reserves for the answer (docs/models-and-chat.md "Holds"). Default 4096, never more than
   * the context window.
   */
  maxOutputTokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  /** Account plans that may use the model; all plans when absent. */
  plans: v.optional(v.array(v.pipe(v.string(), v.minLength(1)))),
};

const EchoEntry = v.strictObject({ provider: v.literal("echo"), ...Common });

const HttpUrl = v.pipe(v.string(), v.url("must be an absolute URL"), v.regex(/^https?:\/\//i, "must be an http(s) URL"));

/** Fields every upstream provider takes (docs/providers.md). */
const Upstream = {
  /** Name of the environment variable holding the upstream key (never the key itself). */
  apiKeyEnv: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"))),
  /** The upstream's own model name (Azure: the deployment; Bedrock: the model or inference profile id); defaults to the id. */
  upstreamModel: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** Overrides MODEL_TIMEOUT_SECONDS for this model (fractions allowed). */
  timeoutSeconds: v.optional(v.pipe(v.number(), v.minValue(0.01), v.maxValue(3600))),
};

const OpenAiEntry = v.strictObject({
  provider: v.literal("openai-compatible"),
  /** Base URL up to and including the version, e.g. `https://api.openai.com/v1`. */
  baseURL: HttpUrl,
  ...Upstream,
  ...Common,
});

const AzureEntry = v.strictObject({
  provider: v.literal("azure-openai"),
  /** The resource's endpoint, e.g. `https://my-resource.openai.azure.com`. */
  baseURL: HttpUrl,
  /** The `api-version` query parameter. */
  apiVersion: v.optional(v.pipe(v.string(), v.regex(/^\d{4}-\d{2}-\d{2}(-preview)?$/, 'must be a date like "2024-10-21" (or "…-preview")')), "2024-10-21"),
  ...Upstream,
  ...Common,
});

const AnthropicEntry = v.strictObject({
  provider: v.literal("anthropic"),
  /** As the Anthropic SDK takes it: the service POSTs to `<baseURL>/v1/messages`. */
  baseURL: v.optional(HttpUrl, "https://api.anthropic.com"),
  ...Upstream,
  ...Common,
});

const GeminiEntry = v.strictObject({
  provider: v.literal("gemini"),
  /** Up to and including the version: the service POSTs to `<baseURL>/models/<model>:generateContent`. */
  baseURL: v.optional(HttpUrl, "https://generativelanguage.googleapis.com/v1beta"),
  ...Upstream,
  ...Common,
});

const BedrockEntry = v.strictObject({
  provider: v.literal("bedrock"),
  /** The AWS region; AWS_REGION (or AWS_DEFAULT_REGION) when absent. */
  region: v.optional(v.pipe(v.string(), v.regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, 'must be an AWS region like "us-east-1"'))),
  /** Defaults to `https://bedrock-runtime.<region>.amazonaws.com` (a VPC endpoint or a test server otherwise). */
  baseURL: v.optional(HttpUrl),
  upstreamModel: Upstream.upstreamModel,
  timeoutSeconds: Upstream.timeoutSeconds,
  ...Common,
});

/** The providers a model may name (docs/providers.md). */
export const PROVIDERS = ["echo", "openai-compatible", "azure-openai", "anthropic", "gemini", "bedrock"] as const;

const Entry = v.variant(
  "provider",
  [EchoEntry, OpenAiEntry, AzureEntry, AnthropicEntry, GeminiEntry, BedrockEntry],
  `provider must be one of ${PROVIDERS.map((name) => `"${name}"`).join(", ")}`,
);

const Document = v.strictObject({
  models: v.record(v.pipe(v.string(), v.regex(/^[\w.:/-]{1,128}$/, "model ids are letters, digits and _ . : / - (max 128)")), Entry),
});

export type OpenAiModelConfig = v.InferOutput<typeof OpenAiEntry>;
export type AzureModelConfig = v.InferOutput<typeof AzureEntry>;
export type AnthropicModelConfig = v.InferOutput<typeof AnthropicEntry>;
export type GeminiModelConfig = v.InferOutput<typeof GeminiEntry>;
export type BedrockModelConfig = v.InferOutput<typeof BedrockEntry>;
export type ModelConfig = v.InferOutput<typeof Entry>;

/** What `npm start` serves with nothing configured: the network-free echo model. */
const DEFAULT_MODELS: Record<string, ModelConfig> = {
  "echo-1": { provider: "echo", ownedBy: "gateway", contextWindow: 8192, public: true, price: { input: 1000, output: 2000 } },
};

function parseDocument(source: string, text: string): Record<string, ModelConfig> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new ConfigError([`${source}: not valid JSON (${(error as Error).message})`]);
  }
  const result = v.safeParse(Document, raw);
  if (!result.success) {
    throw new ConfigError(result.issues.map((issue) => `${source}: ${v.getDotPath(issue) ?? "(root)"}: ${issue.message}`));
  }
  return result.output.models;
}

/** The configured models, id → entry; the echo default when neither source is set. */
export function loadModels(config: Pick<Config, "MODELS_FILE" | "MODELS_JSON">): Record<string, ModelConfig> {
  if (!config.MODELS_FILE && !config.MODELS_JSON) return { ...DEFAULT_MODELS };
  let models: Record<string, ModelConfig> = {};
  if (config.MODELS_FILE) {
    let text: string;
    try {
      text = readFileSync(config.MODELS_FILE, "utf8");
    } catch (error) {
      throw new ConfigError([`MODELS_FILE=${config.MODELS_FILE}: cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`]);
    }
    models = parseDocument(`MODELS_FILE ${config.MODELS_FILE}`, text);
  }
  if (config.MODELS_JSON) models = { ...models, ...parseDocument("MODELS_JSON", config.MODELS_JSON) };
  return models;
}
