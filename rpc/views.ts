import * as v from "valibot";

/**
 * Output shapes shared by several domains' method declarations (OpenAPI responses; handlers
 * are type-checked against them). A domain's own shapes live next to its methods.
 */

export const Timestamp = v.pipe(v.string(), v.description("ISO 8601 timestamp"));
export const NullableTimestamp = v.nullable(Timestamp);

export const UserView = v.object({
  id: v.string(),
  email: v.string(),
  fullName: v.string(),
  tenantId: v.string(),
  workspaceId: v.string(),
  plan: v.string(),
  createdAt: Timestamp,
});

export const SessionIssued = v.object({
  user: UserView,
  token: v.string(),
  tokenType: v.pipe(v.string(), v.description('Always "Bearer"')),
  expiresAt: Timestamp,
});

export const Success = v.object({ success: v.boolean() });

export const GatewayKeyView = v.object({
  id: v.string(),
  name: v.string(),
  description: v.string(),
  prefix: v.string(),
  createdAt: Timestamp,
  lastUsedAt: NullableTimestamp,
  expiresAt: NullableTimestamp,
  /** Model patterns the key may use; null: any (docs/access-control.md). */
  allowedModels: v.nullable(v.array(v.string())),
  /** Tool patterns the key may list and call; null: any. */
  allowedTools: v.nullable(v.array(v.string())),
});

export const AccountKeyView = v.object({
  id: v.string(),
  name: v.string(),
  scopes: v.array(v.string()),
  prefix: v.string(),
  createdAt: Timestamp,
  lastUsedAt: NullableTimestamp,
  /** Model patterns the key may use; null: any (docs/access-control.md). */
  allowedModels: v.nullable(v.array(v.string())),
  /** Tool patterns the key may list and call; null: any. */
  allowedTools: v.nullable(v.array(v.string())),
});

export const ConsoleKeyView = v.object({
  id: v.string(),
  name: v.string(),
  createdAt: Timestamp,
  expiresAt: NullableTimestamp,
  lastUsedAt: NullableTimestamp,
  scopes: v.array(v.string()),
  spendLimit: v.nullable(v.number()),
  rpmLimit: v.nullable(v.number()),
  tpmLimit: v.nullable(v.number()),
  /** Only on a key with a model allow-list (docs/access-control.md): docs/interface.md 4.3 lists the other fields. */
  allowedModels: v.optional(v.array(v.string())),
  /** Only on a key with a tool allow-list. */
  allowedTools: v.optional(v.array(v.string())),
});

/** The plaintext secret, in the create response only. */
export const WithSecret = v.object({ key: v.pipe(v.string(), v.description("The key's secret: shown in this response only")) });

export const TenantView = v.object({
  id: v.string(),
  slug: v.string(),
  name: v.string(),
  plan: v.string(),
  region: v.string(),
  limits: v.object({ agents: v.number(), tokensPerMonth: v.number() }),
  usage: v.object({ agents: v.number(), tokensThisMonth: v.number(), month: v.pipe(v.string(), v.description("YYYY-MM (UTC)")) }),
  ownerId: v.pipe(v.string(), v.description("The user who created the tenant")),
  role: v.optional(v.pipe(v.picklist(["viewer", "member", "admin", "owner"]), v.description("The caller's role in the tenant"))),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  /** Model patterns every caller of the tenant is held to; null: any (docs/access-control.md). */
  allowedModels: v.nullable(v.array(v.string())),
  /** Tool patterns every caller of the tenant is held to; null: any. */
  allowedTools: v.nullable(v.array(v.string())),
});

export const ModelEntry = v.object({
  id: v.string(),
  object: v.string(),
  created: v.pipe(v.number(), v.description("Unix seconds")),
  owned_by: v.string(),
  context_window: v.number(),
  deprecated: v.optional(v.pipe(v.literal(true), v.description("Only on a deprecated model; it still answers"))),
  deprecation: v.optional(v.object({ deprecatedAt: v.nullable(v.string()), message: v.string() })),
});

export const ModelList = v.object({ object: v.string(), data: v.array(ModelEntry) });

export const AgentView = v.object({
  id: v.string(),
  name: v.string(),
  model: v.string(),
  tools: v.array(v.string()),
  status: v.picklist(["idle", "deployed", "paused", "running", "error"]),
  description: v.string(),
  config: v.object({
    maxSteps: v.number(),
    systemPrompt: v.optional(v.string()),
    temperature: v.optional(v.number()),
    maxTokens: v.optional(v.number()),
    toolTimeoutSeconds: v.optional(v.number()),
  }),
  tenantId: v.string(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

/** MCP's CallToolResult, as every tool source answers. */
export const ToolResultView = v.object({
  content: v.array(v.object({ type: v.string(), text: v.optional(v.string()) })),
  structuredContent: v.optional(v.record(v.string(), v.unknown())),
  isError: v.optional(v.boolean()),
});

export const ToolView = v.object({
  name: v.string(),
  description: v.string(),
  category: v.string(),
  inputSchema: v.record(v.string(), v.unknown()),
  source: v.picklist(["builtin", "mcp", "vm"]),
});

export const UpstreamServerView = v.object({
  name: v.string(),
  url: v.string(),
  category: v.string(),
  headers: v.pipe(v.array(v.string()), v.description("Names of the headers sent upstream; their values are never shown")),
  shared: v.boolean(),
  health: v.picklist(["connecting", "healthy", "unhealthy"]),
  lastError: v.nullable(v.string()),
  toolCount: v.number(),
  tools: v.array(v.string()),
  connectedAt: NullableTimestamp,
  createdAt: Timestamp,
});

const Usage = v.object({ prompt_tokens: v.number(), completion_tokens: v.number(), total_tokens: v.number() });

/** A chat completion (OpenAI's shape); `stream: true` answers `chat.completion.chunk` events instead. */
export const ChatCompletionView = v.object({
  id: v.string(),
  object: v.string(),
  created: v.optional(v.number()),
  model: v.string(),
  choices: v.array(
    v.object({
      index: v.optional(v.number()),
      message: v.object({
        role: v.string(),
        content: v.nullable(v.string()),
        tool_calls: v.optional(
          v.array(
            v.object({ id: v.string(), type: v.literal("function"), function: v.object({ name: v.string(), arguments: v.string() }) }),
          ),
        ),
      }),
      finish_reason: v.nullable(v.string()),
    }),
  ),
  usage: v.optional(Usage),
});

export const ToolPlanView = v.object({
  id: v.string(),
  input: v.string(),
  status: v.string(),
  steps: v.array(v.object({ index: v.number(), tool: v.string(), status: v.string() })),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const AgentRunView = v.object({
  runId: v.string(),
  agentId: v.string(),
  status: v.picklist(["completed", "max_steps", "error", "cancelled"]),
  output: v.string(),
  steps: v.array(v.unknown()),
  usage: Usage,
  error: v.optional(v.string()),
  startedAt: Timestamp,
  finishedAt: Timestamp,
});

/** Relayed from the orchestrator as it answered (docs/interface.md 4.4 "API-gateway mode"). */
export const Relayed = v.pipe(v.unknown(), v.description("The orchestrator's answer, relayed unchanged"));
