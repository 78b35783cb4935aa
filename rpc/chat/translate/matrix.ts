import { ServiceError } from "../../errors.js";
import type { ChatRequest } from "../types.js";

/**
 * What each kind of upstream does with each field of the canonical request (docs/dialects.md
 * "The matrix"): one table, read by the adapters for what they drop or refuse and rendered into
 * the docs (test/rpc/chat/dialect-matrix.test.ts checks both against the mocks). Nothing is
 * dropped silently: a dropped field is named in `X-Service-Warning` and the request's log line;
 * a refused one is a 400 naming it.
 */

/** The kinds of upstream, by the wire format the adapter sends. */
export const TARGETS = ["chat", "responses", "anthropic", "gemini", "bedrock", "echo"] as const;
export type Target = (typeof TARGETS)[number];

/** Column titles of the rendered table. */
const TARGET_TITLES: Readonly<Record<Target, string>> = {
  chat: "openai-compatible, azure-openai (chat completions)",
  responses: 'openai-compatible, azure-openai (`apis: ["responses"]`)',
  anthropic: "anthropic",
  gemini: "gemini",
  bedrock: "bedrock",
  echo: "echo",
};

export type Treatment =
  /** Sent as it came, same name and meaning. */
  | "forwarded"
  /** Sent as the provider's own field (`note` says which). */
  | "translated"
  /** Done another way the provider supports (`note` says how). */
  | "emulated"
  /** The built-in echo model does what the field asks. */
  | "honoured"
  /** Accepted and without effect on a deterministic model (echo). */
  | "no effect"
  /** Left out with an `X-Service-Warning` and a log line. */
  | "dropped"
  /** 400 naming the field (`when` says when). */
  | "refused";

export interface Cell {
  how: Treatment;
  note?: string;
}

/** The canonical fields the matrix covers, with when a value asks for something (a refusal applies only then). */
const FIELDS = {
  temperature: { asks: (request: ChatRequest) => request.temperature !== undefined },
  top_p: { asks: (request: ChatRequest) => request.top_p !== undefined },
  max_tokens: { asks: (request: ChatRequest) => request.max_tokens !== undefined },
  stop: { asks: (request: ChatRequest) => request.stop !== undefined && (typeof request.stop === "string" || request.stop.length > 0) },
  seed: { asks: (request: ChatRequest) => request.seed !== undefined },
  n: { asks: (request: ChatRequest) => request.n !== undefined && request.n > 1, when: "n > 1" },
  logprobs: { asks: (request: ChatRequest) => request.logprobs === true, when: "true" },
  top_logprobs: { asks: (request: ChatRequest) => (request.top_logprobs ?? 0) > 0, when: "> 0" },
  presence_penalty: { asks: (request: ChatRequest) => request.presence_penalty !== undefined },
  frequency_penalty: { asks: (request: ChatRequest) => request.frequency_penalty !== undefined },
  top_k: { asks: (request: ChatRequest) => request.top_k !== undefined },
  user: { asks: (request: ChatRequest) => request.user !== undefined },
  metadata: { asks: (request: ChatRequest) => request.metadata !== undefined && Object.keys(request.metadata).length > 0 },
  parallel_tool_calls: { asks: (request: ChatRequest) => request.parallel_tool_calls !== undefined && !!request.tools?.length },
  reasoning_effort: { asks: (request: ChatRequest) => request.reasoning_effort !== undefined },
  response_format: { asks: (request: ChatRequest) => request.response_format !== undefined && request.response_format.type !== "text" },
} as const;

export type MatrixField = keyof typeof FIELDS;

const F = (how: Treatment, note?: string): Cell => (note === undefined ? { how } : { how, note });

/** The table (docs/dialects.md "The matrix"). */
export const MATRIX: Readonly<Record<MatrixField, Readonly<Record<Target, Cell>>>> = {
  temperature: {
    chat: F("forwarded"),
    responses: F("forwarded"),
    anthropic: F("forwarded"),
    gemini: F("translated", "generationConfig.temperature"),
    bedrock: F("translated", "inferenceConfig.temperature"),
    echo: F("no effect"),
  },
  top_p: {
    chat: F("forwarded"),
    responses: F("forwarded"),
    anthropic: F("forwarded"),
    gemini: F("translated", "generationConfig.topP"),
    bedrock: F("translated", "inferenceConfig.topP"),
    echo: F("no effect"),
  },
  max_tokens: {
    chat: F("forwarded", "as `max_tokens` or `max_completion_tokens`, whichever the client sent"),
    responses: F("translated", "max_output_tokens"),
    anthropic: F("translated", "max_tokens, always sent (the model's output cap when the request has none)"),
    gemini: F("translated", "generationConfig.maxOutputTokens"),
    bedrock: F("translated", "inferenceConfig.maxTokens"),
    echo: F("honoured", "the answer is cut, finish reason `length`"),
  },
  stop: {
    chat: F("forwarded"),
    responses: F("dropped", "the Responses API has no stop sequences"),
    anthropic: F("translated", "stop_sequences"),
    gemini: F("translated", "generationConfig.stopSequences"),
    bedrock: F("translated", "inferenceConfig.stopSequences"),
    echo: F("honoured", "the answer ends before the first stop sequence"),
  },
  seed: {
    chat: F("forwarded"),
    responses: F("dropped", "the Responses API has no seed"),
    anthropic: F("dropped", "the Messages API has no seed"),
    gemini: F("translated", "generationConfig.seed"),
    bedrock: F("dropped", "Converse has no seed"),
    echo: F("no effect"),
  },
  n: {
    chat: F("forwarded"),
    responses: F("refused", "n > 1: one answer per request"),
    anthropic: F("refused", "n > 1: one answer per request"),
    gemini: F("refused", "n > 1: one answer per request"),
    bedrock: F("refused", "n > 1: one answer per request"),
    echo: F("refused", "n > 1: one answer per request"),
  },
  logprobs: {
    chat: F("forwarded"),
    responses: F("refused", "when true"),
    anthropic: F("refused", "when true"),
    gemini: F("refused", "when true"),
    bedrock: F("refused", "when true"),
    echo: F("refused", "when true"),
  },
  top_logprobs: {
    chat: F("forwarded"),
    responses: F("refused", "when > 0"),
    anthropic: F("refused", "when > 0"),
    gemini: F("refused", "when > 0"),
    bedrock: F("refused", "when > 0"),
    echo: F("refused", "when > 0"),
  },
  presence_penalty: {
    chat: F("forwarded"),
    responses: F("dropped", "the Responses API has no penalties"),
    anthropic: F("dropped", "the Messages API has no penalties"),
    gemini: F("translated", "generationConfig.presencePenalty"),
    bedrock: F("dropped", "Converse has no penalties"),
    echo: F("no effect"),
  },
  frequency_penalty: {
    chat: F("forwarded"),
    responses: F("dropped", "the Responses API has no penalties"),
    anthropic: F("dropped", "the Messages API has no penalties"),
    gemini: F("translated", "generationConfig.frequencyPenalty"),
    bedrock: F("dropped", "Converse has no penalties"),
    echo: F("no effect"),
  },
  top_k: {
    chat: F("dropped", "the chat completions format has no top_k"),
    responses: F("dropped", "the Responses API has no top_k"),
    anthropic: F("forwarded"),
    gemini: F("translated", "generationConfig.topK"),
    bedrock: F("dropped", "Converse has no top_k"),
    echo: F("no effect"),
  },
  user: {
    chat: F("forwarded"),
    responses: F("translated", "safety_identifier"),
    anthropic: F("translated", "metadata.user_id"),
    gemini: F("dropped", "the Gemini API has no end-user id"),
    bedrock: F("translated", "requestMetadata.user"),
    echo: F("no effect"),
  },
  metadata: {
    chat: F("forwarded"),
    responses: F("forwarded"),
    anthropic: F("dropped", "the Messages API's metadata takes user_id only"),
    gemini: F("dropped", "the Gemini API has no request metadata"),
    bedrock: F("translated", "requestMetadata"),
    echo: F("no effect"),
  },
  parallel_tool_calls: {
    chat: F("forwarded"),
    responses: F("forwarded"),
    anthropic: F("translated", "tool_choice.disable_parallel_tool_use"),
    gemini: F("dropped", "Gemini has no such switch"),
    bedrock: F("dropped", "Converse has no such switch"),
    echo: F("no effect"),
  },
  reasoning_effort: {
    chat: F("forwarded"),
    responses: F("translated", "reasoning.effort, with summary `auto`"),
    anthropic: F(
      "translated",
      "thinking with a budget_tokens by effort (`none`: thinking disabled); dropped beside a forced structured-output tool",
    ),
    gemini: F("translated", "generationConfig.thinkingConfig.thinkingBudget by effort"),
    bedrock: F("translated", "additionalModelRequestFields.thinking on Anthropic models; dropped on others"),
    echo: F("honoured", "a reasoning text before the answer"),
  },
  response_format: {
    chat: F("forwarded"),
    responses: F("translated", "text.format"),
    anthropic: F(
      "translated",
      'json_schema: output_config.format; json_object (and json_schema with `structuredOutput: "tool"`): a forced tool call, answered as text',
    ),
    gemini: F("translated", "generationConfig.responseMimeType and responseJsonSchema"),
    bedrock: F(
      "translated",
      'json_schema: outputConfig.textFormat; json_object (and json_schema with `structuredOutput: "tool"`): a forced tool call, answered as text',
    ),
    echo: F("honoured", "a JSON value of the schema (`json_object`: an object), built from the echoed text"),
  },
};

/**
 * What translating one request to one upstream left out, for `X-Service-Warning` and the log
 * line; and its refusals, as the 400 of a request that cannot be served as asked.
 */
/** What the models document says of a model that translation reads (docs/providers.md "Fields"). */
export interface TranslationConfig {
  /** Fields the upstream refuses: dropped with a warning, forwarded or translated. */
  dropParams?: readonly string[];
  /** The model's output cap: a translated request asking for more gets this, with a warning. */
  maxOutputTokens?: number;
}

export class Translation {
  readonly warnings: string[] = [];

  constructor(
    readonly target: Target,
    /** The model id, for messages. */
    readonly model: string,
    readonly config: TranslationConfig = {},
  ) {}

  /** A field left out: the client hears of it in the answer's headers. */
  drop(field: string, why: string): void {
    const warning = `${field} dropped: ${why}`;
    if (!this.warnings.includes(warning)) this.warnings.push(warning);
  }

  /** A field the upstream cannot serve as asked: 400 before anything is sent. */
  refuse(field: string, why: string): never {
    const message = `${field} is not supported by model ${this.model}: ${why}`;
    throw new ServiceError("VALIDATION_FAILED", `Invalid request: ${message}`, { details: { issues: [{ path: field, message }] } });
  }
}

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/**
 * Applies the matrix's `dropped` and `refused` cells of `target` to a request: refuses what must
 * be refused, and returns the request without the dropped fields (warned on `t`). The adapter
 * translates the rest.
 */
export function applyMatrix(request: ChatRequest, t: Translation): ChatRequest {
  // What the client's dialect had and the canonical request could not hold: only its own dialect's upstream takes it.
  const unreadable = request.source?.unreadable?.[0];
  if (unreadable) {
    throw new ServiceError("VALIDATION_FAILED", `Invalid request: ${unreadable.path}: ${unreadable.message} (model ${t.model})`, {
      details: { issues: [unreadable] },
    });
  }
  // Roles the chat format names; another role reaches a chat-format upstream only.
  if (t.target !== "chat")
    request.messages.forEach((message, index) => {
      if (!ROLES.has(message.role))
        t.refuse(
          `messages.${index}.role`,
          `${JSON.stringify(message.role)} is not a role this upstream has (system, developer, user, assistant, tool)`,
        );
    });
  let out = request;
  const { dropParams, maxOutputTokens } = t.config;
  for (const field of dropParams ?? []) {
    if (field in out && out[field as keyof ChatRequest] !== undefined) {
      t.drop(field, "the model's upstream does not take it (dropParams)");
      out = { ...out };
      delete out[field as keyof ChatRequest];
    }
    if (out.extra && field in out.extra) {
      t.drop(field, "the model's upstream does not take it (dropParams)");
      const { [field]: _dropped, ...extra } = out.extra;
      out = { ...out, extra };
    }
  }
  if (maxOutputTokens !== undefined && out.max_tokens !== undefined && out.max_tokens > maxOutputTokens) {
    t.warnings.push(`max_tokens lowered to ${maxOutputTokens}: the model's maxOutputTokens`);
    out = { ...out, max_tokens: maxOutputTokens };
  }
  for (const field of Object.keys(FIELDS) as MatrixField[]) {
    const cell = MATRIX[field][t.target];
    if (cell.how !== "dropped" && cell.how !== "refused") continue;
    if (!FIELDS[field].asks(request)) continue;
    if (cell.how === "refused") t.refuse(field, cell.note ?? "the provider has no such field");
    t.drop(field, cell.note ?? "the provider has no such field");
    out = { ...out };
    delete out[field];
  }
  // The echo model answers the same whatever they say; other upstreams hear of the rest by name.
  if (t.target !== "echo") {
    // Chat completions fields the gateway does not model: they reach chat-format upstreams only.
    if (request.extra && t.target !== "chat")
      for (const field of Object.keys(request.extra)) t.drop(field, `not translated for ${t.target} upstreams`);
    // Fields of the client's own dialect with no place in the canonical request.
    for (const field of request.source?.untranslated ?? []) t.drop(field, `not translated for ${t.target} upstreams`);
  }
  // Server tools (and tool types with no canonical form) run where the client's own dialect is spoken.
  for (const tool of request.source?.serverTools ?? [])
    t.drop(tool.path, `${tool.type} tools are not run by this service (forwarded only to an upstream of the client's own API)`);
  return out;
}

/** The matrix as a Markdown table (docs/dialects.md "The matrix"; the docs test compares them). */
export function matrixMarkdown(): string {
  const head = `| field | ${TARGETS.map((target) => TARGET_TITLES[target]).join(" | ")} |`;
  const rule = `|---|${TARGETS.map(() => "---").join("|")}|`;
  const rows = (Object.keys(MATRIX) as MatrixField[]).map(
    (field) =>
      `| \`${field}\` | ${TARGETS.map((target) => {
        const cell = MATRIX[field][target];
        return cell.note ? `${cell.how}: ${cell.note}` : cell.how;
      }).join(" | ")} |`,
  );
  return [head, rule, ...rows].join("\n");
}

/**
 * The client's own body for an upstream of its dialect: the model id changed and the model's
 * `dropParams` left out (warned on `t`); everything else as the client sent it.
 */
export function forwardedBody(body: Readonly<Record<string, unknown>>, model: string, t: Translation): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body, model };
  for (const field of t.config.dropParams ?? []) {
    if (out[field] === undefined) continue;
    t.drop(field, "the model's upstream does not take it (dropParams)");
    delete out[field];
  }
  return out;
}
