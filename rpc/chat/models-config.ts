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

/** Where requests go: one upstream's connection, as a single-upstream entry and a deployment have it. */
const EchoUpstream = { provider: v.literal("echo") };

const OpenAiUpstream = {
  provider: v.literal("openai-compatible"),
  /** Base URL up to and including the version, e.g. `https://api.openai.com/v1`. */
  baseURL: v.pipe(v.string(), v.url("must be an absolute URL")),
  /** Name of the environment variable holding the upstream key (never the key itself). */
  apiKeyEnv: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"))),
  /** The upstream's own model name; defaults to the id. */
  upstreamModel: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** Overrides MODEL_TIMEOUT_SECONDS for this model (fractions allowed). */
  timeoutSeconds: v.optional(v.pipe(v.number(), v.minValue(0.01), v.maxValue(3600))),
};

const EchoEntry = v.strictObject({ ...EchoUpstream, ...Common, ...Reliability });

const OpenAiEntry = v.strictObject({ ...OpenAiUpstream, ...Common, ...Reliability });

const SingleEntry = v.variant("provider", [EchoEntry, OpenAiEntry], 'provider must be "echo" or "openai-compatible"');

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
  [v.strictObject({ ...EchoUpstream, ...DeploymentFields }), v.strictObject({ ...OpenAiUpstream, ...DeploymentFields })],
  'provider must be "echo" or "openai-compatible"',
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
  const { ownedBy: _o, contextWindow: _c, public: _p, price: _price, maxOutputTokens: _m, plans: _plans, retries: _r, fallbacks: _f, cooldownSeconds: _cs, ...upstream } = config;
  return [{ ...upstream, weight: 1 } as DeploymentConfig];
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
      throw new ConfigError([`MODELS_FILE=${config.MODELS_FILE}: cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`]);
    }
    models = parseDocument(`MODELS_FILE ${config.MODELS_FILE}`, text);
  }
  if (config.MODELS_JSON) models = { ...models, ...parseDocument("MODELS_JSON", config.MODELS_JSON) };
  const problems: string[] = [];
  for (const [id, entry] of Object.entries(models)) {
    for (const fallback of entry.fallbacks ?? []) {
      if (fallback === id) problems.push(`models.${id}.fallbacks: a model cannot fall back to itself`);
      else if (!models[fallback]) problems.push(`models.${id}.fallbacks: unknown model '${fallback}'`);
    }
  }
  if (problems.length) throw new ConfigError(problems);
  return models;
}
