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

const OpenAiEntry = v.strictObject({
  provider: v.literal("openai-compatible"),
  /** Base URL up to and including the version, e.g. `https://api.openai.com/v1`. */
  baseURL: v.pipe(v.string(), v.url("must be an absolute URL")),
  /** Name of the environment variable holding the upstream key (never the key itself). */
  apiKeyEnv: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"))),
  /** The upstream's own model name; defaults to the id. */
  upstreamModel: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** Overrides MODEL_TIMEOUT_SECONDS for this model (fractions allowed). */
  timeoutSeconds: v.optional(v.pipe(v.number(), v.minValue(0.01), v.maxValue(3600))),
  ...Common,
});

const Entry = v.variant("provider", [EchoEntry, OpenAiEntry], 'provider must be "echo" or "openai-compatible"');

const Document = v.strictObject({
  models: v.record(v.pipe(v.string(), v.regex(/^[\w.:/-]{1,128}$/, "model ids are letters, digits and _ . : / - (max 128)")), Entry),
});

export type OpenAiModelConfig = v.InferOutput<typeof OpenAiEntry>;
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
