import { readFileSync } from "node:fs";
import * as v from "valibot";
import { ConfigError, type Config } from "../config.js";

/**
 * The models document (docs/models-and-chat.md): `{"models": {"<id>": <entry>}}`, read from
 * MODELS_FILE and MODELS_JSON at start. A bad document stops the start naming the problem.
 */
/** What a model is used for (docs/embeddings.md "Which models embed"). */
export const MODES = ["chat", "embedding"] as const;
export type ModelMode = (typeof MODES)[number];

/** The providers that embed (docs/embeddings.md): Anthropic has no embeddings API. */
export const EMBEDDING_PROVIDERS = ["echo", "openai-compatible", "azure-openai", "gemini", "bedrock"] as const;

const Price = v.strictObject({
  /** Micro-credits per 1,000 prompt tokens. */
  input: v.pipe(v.number(), v.minValue(0)),
  /** Micro-credits per 1,000 completion tokens. */
  output: v.pipe(v.number(), v.minValue(0)),
});

const Common = {
  /** Shown as `owned_by` in the catalogs (docs/interface.md 2.1). */
  ownedBy: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** Shown as `context_window` (docs/interface.md 2.1). */
  contextWindow: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 8192),
  /** A listed model that is not public is refused with 403 (docs/interface.md 2.1, 7.2). */
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
  /**
   * Request fields this model's upstream refuses, dropped with an `X-Service-Warning` before it
   * is called, forwarded or translated (docs/dialects.md "Per model"): e.g. `reasoning_effort`
   * for an OpenAI model without reasoning, which Claude Code's `output_config.effort` becomes.
   */
  dropParams: v.optional(v.array(v.pipe(v.string(), v.regex(/^[A-Za-z_][\w.]{0,63}$/, "dropParams are field names")))),
  /**
   * What the model does (LiteLLM's `mode`): `chat` (the default) answers chat completions and
   * the dialects, `embedding` answers `POST /embeddings` only (docs/embeddings.md).
   */
  mode: v.optional(v.picklist(MODES, 'mode must be "chat" or "embedding"')),
};

/**
 * How a model behaves when an upstream fails (docs/providers.md "Retries, fallbacks and
 * cooldowns"); accepted by both forms of an entry.
 */
const Reliability = {
  /** Attempts after the first, on another deployment when there is one. Default: one attempt per deployment. */
  retries: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(10))),
  /** Model ids tried in order once every attempt at this model failed. */
  fallbacks: v.optional(v.array(v.pipe(v.string(), v.minLength(1)))),
  /** How long a deployment that failed 3 times within a minute is skipped (default 30). */
  cooldownSeconds: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(86_400))),
};

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

/**
 * Where requests go, per provider: one upstream's connection, as a single-upstream entry and a
 * deployment both have it (docs/providers.md).
 */
const EchoUpstream = { provider: v.literal("echo") };

/** What an upstream of OpenAI's formats takes (docs/providers.md "OpenAI-compatible"). */
const OpenAiApis = {
  /**
   * The APIs the upstream serves (docs/dialects.md "Same dialect: forwarded"): a request in one
   * of them is forwarded as it came; any other is translated to the first. Default `["chat"]`;
   * OpenAI itself serves `["chat", "responses"]`, a Responses-only model `["responses"]`.
   */
  apis: v.optional(
    v.pipe(v.array(v.picklist(["chat", "responses"], 'apis are "chat" and "responses"')), v.minLength(1, "apis must not be empty")),
    ["chat"],
  ),
  /**
   * The chat field a translated request's output cap goes in: `max_tokens` (default, what most
   * OpenAI-compatible servers read) or `max_completion_tokens` (OpenAI's reasoning models).
   */
  maxTokensField: v.optional(v.picklist(["max_tokens", "max_completion_tokens"]), "max_tokens"),
  /**
   * On the Platform API, whose requests carry exactly six fields to the model (spec 4.2), a
   * stream is billed on the service's own count of what was streamed; `true` asks the upstream
   * for its count too (`stream_options.include_usage`, a seventh field) and bills that. The
   * Account and Gateway APIs always ask (docs/providers.md "Fields").
   */
  streamUsage: v.optional(v.boolean(), false),
};

/** How a provider with a native structured-output field is asked for one (docs/dialects.md "Structured output"). */
const StructuredOutput = {
  /** `native` (default): the provider's own field; `tool`: a forced tool call, for models without it. */
  structuredOutput: v.optional(v.picklist(["native", "tool"], 'structuredOutput is "native" or "tool"'), "native"),
};

const OpenAiUpstream = {
  provider: v.literal("openai-compatible"),
  /** Base URL up to and including the version, e.g. `https://api.openai.com/v1`. */
  baseURL: HttpUrl,
  ...Upstream,
  ...OpenAiApis,
};

const AzureUpstream = {
  provider: v.literal("azure-openai"),
  /** The resource's endpoint, e.g. `https://my-resource.openai.azure.com`. */
  baseURL: HttpUrl,
  /** The `api-version` query parameter. */
  apiVersion: v.optional(
    v.pipe(v.string(), v.regex(/^\d{4}-\d{2}-\d{2}(-preview)?$/, 'must be a date like "2024-10-21" (or "…-preview")')),
    "2024-10-21",
  ),
  ...Upstream,
  ...OpenAiApis,
};

const AnthropicUpstream = {
  provider: v.literal("anthropic"),
  /** As the Anthropic SDK takes it: the service POSTs to `<baseURL>/v1/messages`. */
  baseURL: v.optional(HttpUrl, "https://api.anthropic.com"),
  ...Upstream,
  ...StructuredOutput,
};

const GeminiUpstream = {
  provider: v.literal("gemini"),
  /** Up to and including the version: the service POSTs to `<baseURL>/models/<model>:generateContent`. */
  baseURL: v.optional(HttpUrl, "https://generativelanguage.googleapis.com/v1beta"),
  ...Upstream,
};

const BedrockUpstream = {
  provider: v.literal("bedrock"),
  /** The AWS region; AWS_REGION (or AWS_DEFAULT_REGION) when absent. */
  region: v.optional(v.pipe(v.string(), v.regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, 'must be an AWS region like "us-east-1"'))),
  /** Defaults to `https://bedrock-runtime.<region>.amazonaws.com` (a VPC endpoint or a test server otherwise). */
  baseURL: v.optional(HttpUrl),
  upstreamModel: Upstream.upstreamModel,
  timeoutSeconds: Upstream.timeoutSeconds,
  ...StructuredOutput,
};

/** The providers a model may name (docs/providers.md). */
export const PROVIDERS = ["echo", "openai-compatible", "azure-openai", "anthropic", "gemini", "bedrock"] as const;
const PROVIDER_MESSAGE = `provider must be one of ${PROVIDERS.map((name) => `"${name}"`).join(", ")}`;

const EchoEntry = v.strictObject({ ...EchoUpstream, ...Common, ...Reliability });
const OpenAiEntry = v.strictObject({ ...OpenAiUpstream, ...Common, ...Reliability });
const AzureEntry = v.strictObject({ ...AzureUpstream, ...Common, ...Reliability });
const AnthropicEntry = v.strictObject({ ...AnthropicUpstream, ...Common, ...Reliability });
const GeminiEntry = v.strictObject({ ...GeminiUpstream, ...Common, ...Reliability });
const BedrockEntry = v.strictObject({ ...BedrockUpstream, ...Common, ...Reliability });

const SingleEntry = v.variant(
  "provider",
  [EchoEntry, OpenAiEntry, AzureEntry, AnthropicEntry, GeminiEntry, BedrockEntry],
  PROVIDER_MESSAGE,
);

/** What one deployment of a model may set beyond its upstream (docs/providers.md "Deployments"). */
const DeploymentFields = {
  /** Share of the traffic under `weighted` routing (default 1). */
  weight: v.optional(v.pipe(v.number(), v.minValue(0)), 1),
  /** This deployment's price; the model's when absent. */
  price: v.optional(Price),
  timeoutSeconds: v.optional(v.pipe(v.number(), v.minValue(0.01), v.maxValue(3600))),
  /** Requests per minute this deployment takes, across instances; skipped while full. */
  rpm: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  /** Tokens per minute this deployment takes, across instances; skipped while full. */
  tpm: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
};

const Deployment = v.variant(
  "provider",
  [
    v.strictObject({ ...EchoUpstream, ...DeploymentFields }),
    v.strictObject({ ...OpenAiUpstream, ...DeploymentFields }),
    v.strictObject({ ...AzureUpstream, ...DeploymentFields }),
    v.strictObject({ ...AnthropicUpstream, ...DeploymentFields }),
    v.strictObject({ ...GeminiUpstream, ...DeploymentFields }),
    v.strictObject({ ...BedrockUpstream, ...DeploymentFields }),
  ],
  PROVIDER_MESSAGE,
);

const DeploymentsEntry = v.strictObject({
  deployments: v.pipe(v.array(Deployment, "deployments must be an array"), v.minLength(1, "deployments must not be empty")),
  /** How a request picks a deployment: by weight (default), fewest in flight, or lowest time to first byte. */
  routing: v.optional(v.picklist(["weighted", "least-busy", "latency"], "routing must be weighted, least-busy or latency"), "weighted"),
  /** Every deployment's timeout unless it sets its own (MODEL_TIMEOUT_SECONDS otherwise). */
  timeoutSeconds: v.optional(v.pipe(v.number(), v.minValue(0.01), v.maxValue(3600))),
  ...Common,
  ...Reliability,
});

/** An entry lists `deployments`, or is one upstream itself (the one-deployment shorthand). */
const Entry = v.lazy((input) => (typeof input === "object" && input !== null && "deployments" in input ? DeploymentsEntry : SingleEntry));

const Document = v.strictObject({
  models: v.record(v.pipe(v.string(), v.regex(/^[\w.:/-]{1,128}$/, "model ids are letters, digits and _ . : / - (max 128)")), Entry),
});

export type OpenAiModelConfig = v.InferOutput<typeof OpenAiEntry>;
export type AzureModelConfig = v.InferOutput<typeof AzureEntry>;
export type AnthropicModelConfig = v.InferOutput<typeof AnthropicEntry>;
export type GeminiModelConfig = v.InferOutput<typeof GeminiEntry>;
export type BedrockModelConfig = v.InferOutput<typeof BedrockEntry>;
export type SingleModelConfig = v.InferOutput<typeof SingleEntry>;
export type DeploymentsModelConfig = v.InferOutput<typeof DeploymentsEntry>;
export type ModelConfig = SingleModelConfig | DeploymentsModelConfig;
export type DeploymentConfig = v.InferOutput<typeof Deployment>;
export type ModelPrice = v.InferOutput<typeof Price>;

/**
 * The deployments of a model: its list, or the entry itself as the only one (the shorthand of
 * a single upstream; docs/providers.md "Deployments").
 */
export function deploymentsOf(config: ModelConfig): DeploymentConfig[] {
  if ("deployments" in config) return config.deployments;
  const {
    ownedBy: _o,
    contextWindow: _c,
    public: _p,
    price: _price,
    maxOutputTokens: _m,
    plans: _plans,
    dropParams: _drop,
    mode: _mode,
    retries: _r,
    fallbacks: _f,
    cooldownSeconds: _cs,
    ...upstream
  } = config;
  return [{ ...upstream, weight: 1 } as DeploymentConfig];
}

/**
 * One deployment as a provider adapter takes it: the deployment's connection with the model's
 * limits (context window, output cap) that adapters needing a cap (Anthropic) read.
 */
export function providerConfigOf(model: ModelConfig, deployment: DeploymentConfig): SingleModelConfig {
  return {
    ...deployment,
    ownedBy: model.ownedBy,
    contextWindow: model.contextWindow,
    public: model.public,
    price: deployment.price ?? model.price,
    maxOutputTokens: model.maxOutputTokens,
    plans: model.plans,
    dropParams: model.dropParams,
  } as SingleModelConfig;
}

/** The model's mode: `chat` unless the document says `embedding`. */
export function modeOf(config: Pick<ModelConfig, "mode">): ModelMode {
  return config.mode ?? "chat";
}

/**
 * An embedding model on Bedrock is one of the two request formats of InvokeModel the adapter
 * speaks (docs/embeddings.md "Bedrock"), told apart by the upstream model id: Titan Text
 * Embeddings (`amazon.titan-embed-text-…`) or Cohere Embed (`cohere.embed-…`), an inference
 * profile's region prefix (`us.cohere.embed-v4:0`) included.
 */
export function bedrockEmbeddingFormat(upstreamModel: string): "titan" | "cohere" | undefined {
  if (/(^|\.)amazon\.titan-embed-/.test(upstreamModel)) return "titan";
  if (/(^|\.)cohere\.embed-/.test(upstreamModel)) return "cohere";
  return undefined;
}

/** Why an embedding model's deployments cannot embed, if any (checked at start). */
function embeddingProblems(id: string, entry: ModelConfig): string[] {
  const problems: string[] = [];
  for (const [index, deployment] of deploymentsOf(entry).entries()) {
    const where = "deployments" in entry ? `models.${id}.deployments.${index}` : `models.${id}`;
    if (!(EMBEDDING_PROVIDERS as readonly string[]).includes(deployment.provider))
      problems.push(
        `${where}.provider: ${deployment.provider} has no embeddings API (embedding models use ${EMBEDDING_PROVIDERS.join(", ")})`,
      );
    else if (deployment.provider === "bedrock" && !bedrockEmbeddingFormat(deployment.upstreamModel ?? id))
      problems.push(
        `${where}.upstreamModel: an embedding model on bedrock is Titan Text Embeddings (amazon.titan-embed-text-…) or Cohere Embed (cohere.embed-…), not '${deployment.upstreamModel ?? id}'`,
      );
  }
  return problems;
}

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
      throw new ConfigError([
        `MODELS_FILE=${config.MODELS_FILE}: cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
      ]);
    }
    models = parseDocument(`MODELS_FILE ${config.MODELS_FILE}`, text);
  }
  if (config.MODELS_JSON) models = { ...models, ...parseDocument("MODELS_JSON", config.MODELS_JSON) };
  const problems: string[] = [];
  for (const [id, entry] of Object.entries(models)) {
    for (const fallback of entry.fallbacks ?? []) {
      if (fallback === id) problems.push(`models.${id}.fallbacks: a model cannot fall back to itself`);
      else if (!models[fallback]) problems.push(`models.${id}.fallbacks: unknown model '${fallback}'`);
      // A fallback answers the same requests: an embedding model falls back to embedding models only.
      else if (modeOf(models[fallback]) !== modeOf(entry))
        problems.push(`models.${id}.fallbacks: '${fallback}' has mode ${modeOf(models[fallback])}, '${id}' has mode ${modeOf(entry)}`);
    }
    if (modeOf(entry) === "embedding") problems.push(...embeddingProblems(id, entry));
  }
  if (problems.length) throw new ConfigError(problems);
  return models;
}
