import * as v from "valibot";
import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import { queryInt } from "../validate.js";
import { newId } from "../../storage/ids.js";
import type { AgentConfig, AgentRecord } from "../../storage/repos/agents.js";
import { agentTimestamp } from "../time.js";
import { invokeAgent } from "./invoke.js";
import { cancelRun, watchRuns } from "./runs.js";
import { appendAgentLog, dropAgentLogs, readAgentLogs } from "./logs.js";
import { agentView, requireAgent } from "./records.js";
import { clearState, runningCount, transition, type Transition } from "./state.js";
import { createInTenant } from "../tenants/tenancy.js";
import { requireTenantAccess, tenantOrPersonal, tenantsOf, type Role } from "../tenants/access.js";
import type { AgentEvent, RunResult } from "./run.js";
import { AgentView } from "../views.js";
import { AgentRunView, Success, Timestamp } from "../views.js";
import { emitEvent } from "../event-sink.js";
import { endingWith, holderScopes, takePlaces, takeStreamPlace, type PlaceScope } from "../quotas.js";
import { agentsDomain, type AgentsDeps, type AgentsContext } from "./deps.js";
import { UNRESTRICTED } from "../allow-list.js";

const AgentId = v.pipe(v.string("agent_id must be a string"), v.minLength(1, "agent_id is required"), v.maxLength(128));
const Name = v.pipe(
  v.string("name must be a string"),
  v.trim(),
  v.minLength(1, "name is required"),
  v.maxLength(100, "name: at most 100 characters"),
);
const Description = v.pipe(v.string("description must be a string"), v.maxLength(2000, "description: at most 2000 characters"));
const Tools = v.pipe(
  v.array(
    v.pipe(v.string("each tool must be a tool name"), v.minLength(1, "tool names are not empty"), v.maxLength(256)),
    "tools must be an array of tool names",
  ),
  v.maxLength(64, "tools: at most 64"),
  v.transform((tools) => [...new Set(tools)]),
);
const Model = v.pipe(v.string("model must be a string"), v.minLength(1, "model is required"), v.maxLength(128));

/** `config` of an agent (docs/agents.md); unknown keys are refused so a typo is not silently ignored. */
const Config = v.strictObject(
  {
    maxSteps: v.optional(
      v.pipe(v.number("maxSteps must be a number"), v.integer("maxSteps must be an integer"), v.minValue(1), v.maxValue(100)),
    ),
    systemPrompt: v.optional(v.pipe(v.string("systemPrompt must be a string"), v.maxLength(20_000))),
    temperature: v.optional(v.pipe(v.number("temperature must be a number"), v.minValue(0), v.maxValue(2))),
    maxTokens: v.optional(
      v.pipe(v.number("maxTokens must be a number"), v.integer("maxTokens must be an integer"), v.minValue(1), v.maxValue(1_000_000)),
    ),
    toolTimeoutSeconds: v.optional(v.pipe(v.number("toolTimeoutSeconds must be a number"), v.minValue(0.05), v.maxValue(3600))),
  },
  "config must be an object with maxSteps, systemPrompt, temperature, maxTokens or toolTimeoutSeconds",
);

const AUTH = { kinds: ["session", "gateway_key"] } as const;

/** 400 naming every tool not in the catalog and a model the router does not serve. */
async function checkToolsAndModel(deps: AgentsDeps, tenantId: string, tools: string[], model?: string): Promise<void> {
  // Only tools the agent's tenant sees: another tenant's server or VM is as unknown as a missing one.
  const known = new Set((await deps.catalog.list({ scope: { tenantId } })).map((tool) => tool.name));
  const unknownTools = tools.filter((name) => !known.has(name));
  let modelProblem: string | undefined;
  if (model !== undefined) {
    try {
      // An agent's model is checked as the tenant configures it; allow-lists hold callers (docs/access-control.md).
      deps.models.resolve(model, UNRESTRICTED.models);
    } catch (error) {
      modelProblem = error instanceof ServiceError ? error.message : String(error);
    }
  }
  if (!unknownTools.length && !modelProblem) return;
  const problems = [
    ...(unknownTools.length ? [`unknown tools: ${unknownTools.join(", ")} (see GET /mcp/tools; on the Account API GET /agent/tools)`] : []),
    ...(modelProblem ? [`unknown model: ${model} (usable: ${deps.models.usableIds(undefined, "chat").join(", ") || "none"})`] : []),
  ];
  throw new ServiceError("VALIDATION_FAILED", `Invalid agent: ${problems.join("; ")}`, {
    details: {
      issues: [
        ...unknownTools.map((name) => ({ path: "tools", message: `unknown tool: ${name}` })),
        ...(modelProblem ? [{ path: "model", message: `unknown model: ${model}` }] : []),
      ],
      ...(unknownTools.length ? { unknownTools } : {}),
      ...(modelProblem ? { unknownModel: model, usableModels: deps.models.usableIds(undefined, "chat") } : {}),
    },
  });
}

function configOf(deps: AgentsDeps, input: v.InferOutput<typeof Config> | undefined): AgentConfig {
  const config: AgentConfig = { maxSteps: input?.maxSteps ?? deps.config.AGENT_DEFAULT_MAX_STEPS };
  if (input?.systemPrompt !== undefined) config.systemPrompt = input.systemPrompt;
  if (input?.temperature !== undefined) config.temperature = input.temperature;
  if (input?.maxTokens !== undefined) config.maxTokens = input.maxTokens;
  if (input?.toolTimeoutSeconds !== undefined) config.toolTimeoutSeconds = input.toolTimeoutSeconds;
  return config;
}

/** The answer of a non-streamed invoke (docs/agents.md "Invoke"). */
function invokeResult(agentId: string, runId: string, result: RunResult, startedAt: string) {
  return {
    runId,
    agentId,
    status: result.status,
    output: result.output,
    steps: result.steps,
    usage: result.usage,
    ...(result.error ? { error: result.error } : {}),
    startedAt,
    finishedAt: agentTimestamp(),
  };
}

async function* framed(runId: string, events: AsyncIterable<AgentEvent>) {
  for await (const event of events) yield { runId, ...event };
}

function lifecycleMethod<const T extends Transition>(action: T, summary: string) {
  return agentsDomain.method({
    name: `agents.${action}`,
    summary,
    input: v.object({ agent_id: AgentId }),
    auth: AUTH,
    output: AgentView,
    errors: { NOT_FOUND: {}, CONFLICT: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "POST", path: `/agents/:agent_id/${action}` }],
    async handler(params, ctx) {
      const agent = await requireAgent(ctx.deps, ctx.principal.userId, params.agent_id, "member");
      const status = await transition(ctx.deps, agent, action);
      emitEvent(ctx.deps, agent.tenantId, `agent.${action === "deploy" ? "deployed" : action === "pause" ? "paused" : "resumed"}`, {
        agentId: agent.id,
        status,
      });
      await appendAgentLog(ctx.deps, agent.id, {
        event: `agent.${action}`,
        message: `Agent ${action === "deploy" ? "deployed" : action === "pause" ? "paused" : "resumed"}`,
        data: { status },
      });
      return agentView(ctx.deps, agent);
    },
  });
}

async function owned(ctx: AgentsContext<Principal>, agentId: string, need: Role = "viewer"): Promise<AgentRecord> {
  return requireAgent(ctx.deps, ctx.principal.userId, agentId, need);
}

export const agentsList = agentsDomain.method({
  name: "agents.list",
  summary:
    "The agents of every tenant the caller is a member of (or of `tenantId` only), oldest first, as a bare JSON array (docs/interface.md 2.6).",
  input: v.object({ tenantId: v.optional(v.pipe(v.string("tenantId must be a string"), v.minLength(1), v.maxLength(128))) }),
  auth: { ...AUTH, kinds: [...AUTH.kinds, "console"] },
  output: v.array(AgentView),
  errors: { NOT_FOUND: {}, FORBIDDEN: {} },
  http: [
    { surface: "gateway", method: "GET", path: "/agents" },
    { surface: "console", method: "GET", path: "/agents" },
  ],
  async handler(params, ctx) {
    const tenants = params.tenantId
      ? [await requireTenantAccess(ctx.deps, ctx.principal, params.tenantId, "viewer")]
      : (await tenantsOf(ctx.deps, ctx.principal)).map(({ tenant }) => tenant);
    const wanted = new Set(tenants.map((tenant) => tenant.id));
    // Every agent of a tenant lives under the tenant's creator: one listing per creator.
    const partitions = [...new Set(tenants.map((tenant) => tenant.ownerId))];
    const agents = (await Promise.all(partitions.map((owner) => ctx.deps.agents.list(owner))))
      .flat()
      .filter((agent) => wanted.has(agent.tenantId))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
    return Promise.all(agents.map((agent) => agentView(ctx.deps, agent)));
  },
});

export const agentsCreate = agentsDomain.method({
  name: "agents.create",
  summary:
    "Create an agent in a tenant (`tenantId`, default the caller's personal tenant). Tools must be in the catalog " +
    "and the model in the router (400 naming the bad ones); 403 past the tenant's limits.agents.",
  input: v.object({
    name: Name,
    model: Model,
    tools: v.optional(Tools, []),
    description: v.optional(Description, ""),
    config: v.optional(Config, {}),
    tenantId: v.optional(v.pipe(v.string("tenantId must be a string"), v.minLength(1), v.maxLength(128))),
  }),
  auth: AUTH,
  output: AgentView,
  errors: { VALIDATION_FAILED: {}, FORBIDDEN: {}, NOT_FOUND: {} },
  http: [{ surface: "gateway", method: "POST", path: "/agents", status: 201 }],
  async handler(params, ctx) {
    const principal = ctx.principal;
    const tenant = await tenantOrPersonal(ctx.deps, principal, params.tenantId, "member");
    await checkToolsAndModel(ctx.deps, tenant.id, params.tools, params.model);
    const now = agentTimestamp();
    const agent: AgentRecord = {
      id: newId("agt"),
      name: params.name,
      model: params.model,
      tools: params.tools,
      description: params.description,
      config: configOf(ctx.deps, params.config),
      tenantId: tenant.id,
      ownerId: tenant.ownerId,
      createdBy: principal.userId,
      createdAt: now,
      updatedAt: now,
    };
    await createInTenant(ctx.deps, tenant, () => ctx.deps.agents.put(agent));
    emitEvent(ctx.deps, agent.tenantId, "agent.created", { agentId: agent.id, name: agent.name, model: agent.model });
    await appendAgentLog(ctx.deps, agent.id, {
      event: "agent.created",
      message: `Agent ${agent.name} created`,
      data: { model: agent.model, tools: agent.tools },
    });
    return agentView(ctx.deps, agent);
  },
});

export const agentsGet = agentsDomain.method({
  name: "agents.get",
  summary: "An agent of a tenant the caller is a member of; a non-member gets the same 404 as for a missing agent.",
  input: v.object({ agent_id: AgentId }),
  auth: AUTH,
  output: AgentView,
  errors: { NOT_FOUND: {}, FORBIDDEN: {} },
  http: [{ surface: "gateway", method: "GET", path: "/agents/:agent_id" }],
  async handler(params, ctx) {
    return agentView(ctx.deps, await owned(ctx, params.agent_id));
  },
});

export const agentsUpdate = agentsDomain.method({
  name: "agents.update",
  summary: "Change an agent's description and/or tools (docs/interface.md 2.6: a partial update); tools must be in the catalog.",
  input: v.object({ agent_id: AgentId, description: v.optional(Description), tools: v.optional(Tools) }),
  auth: AUTH,
  output: AgentView,
  errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, CONFLICT: {}, FORBIDDEN: {} },
  http: [{ surface: "gateway", method: "PUT", path: "/agents/:agent_id" }],
  async handler(params, ctx) {
    const agent = await owned(ctx, params.agent_id, "member");
    if (params.tools) await checkToolsAndModel(ctx.deps, agent.tenantId, params.tools);
    const updated: AgentRecord = {
      ...agent,
      ...(params.description !== undefined ? { description: params.description } : {}),
      ...(params.tools ? { tools: params.tools } : {}),
      updatedAt: agentTimestamp(),
    };
    await ctx.deps.agents.put(updated);
    await appendAgentLog(ctx.deps, agent.id, {
      event: "agent.updated",
      message: "Agent updated",
      data: { fields: [...(params.description !== undefined ? ["description"] : []), ...(params.tools ? ["tools"] : [])] },
    });
    return agentView(ctx.deps, updated);
  },
});

export const agentsDelete = agentsDomain.method({
  name: "agents.delete",
  summary: "Owners: delete an agent with its logs; 409 while an invocation is running.",
  input: v.object({ agent_id: AgentId }),
  auth: AUTH,
  output: Success,
  errors: { NOT_FOUND: {}, CONFLICT: {}, FORBIDDEN: {} },
  http: [{ surface: "gateway", method: "DELETE", path: "/agents/:agent_id" }],
  async handler(params, ctx) {
    const agent = await owned(ctx, params.agent_id, "owner");
    if ((await runningCount(ctx.deps, agent.id)) > 0) {
      throw new ServiceError("CONFLICT", "The agent is running; delete it once its invocations finish", { details: { status: "running" } });
    }
    // Two concurrent deletes: only one removes the agent and its state; the other is a 404.
    if (!(await ctx.deps.agentState.claimDelete(agent.id, 60_000))) {
      throw new ServiceError("NOT_FOUND", `Agent not found: ${agent.id}`);
    }
    await ctx.deps.agents.remove(agent);
    await clearState(ctx.deps, agent.id);
    await dropAgentLogs(ctx.deps, agent.id);
    emitEvent(ctx.deps, agent.tenantId, "agent.deleted", { agentId: agent.id, name: agent.name });
    return { success: true };
  },
});

export const agentsInvoke = agentsDomain.method({
  name: "agents.invoke",
  summary:
    "Run the agent on `input`: the model calls the agent's tools until it answers or config.maxSteps rounds have " +
    "run. The result has output, steps, usage, status and runId; `stream: true` sends the run's events over SSE.",
  input: v.object({
    agent_id: AgentId,
    input: v.pipe(
      v.string("input must be a string"),
      v.minLength(1, "input is required"),
      v.maxLength(100_000, "input: at most 100000 characters"),
    ),
    stream: v.optional(v.boolean("stream must be a boolean"), false),
  }),
  auth: AUTH,
  output: AgentRunView,
  errors: { NOT_FOUND: {}, CONFLICT: {}, QUOTA_EXCEEDED: {}, FORBIDDEN: {}, UNAVAILABLE: {}, MODEL_NOT_AVAILABLE: {} },
  http: [{ surface: "gateway", method: "POST", path: "/agents/:agent_id/invoke" }],
  stream: {},
  async handler(params, ctx) {
    const startedAt = agentTimestamp();
    if (params.stream) {
      // A streamed run holds a place among its credential's streams (QUOTA_STREAMS_PER_KEY, docs/quotas.md) until it ends.
      const place = await takeStreamPlace(ctx.deps, ctx.principal, ctx.signal);
      try {
        const { runId, events } = await invokeAgent(ctx.deps, ctx.principal, params.agent_id, params.input, ctx.signal, {
          traceparent: ctx.traceparent,
        });
        return endingWith(framed(runId, events), place.release);
      } catch (error) {
        await place.release();
        throw error;
      }
    }
    const { runId, events } = await invokeAgent(ctx.deps, ctx.principal, params.agent_id, params.input, ctx.signal, {
      traceparent: ctx.traceparent,
    });
    for await (const event of events) {
      if (event.type === "done") return invokeResult(params.agent_id, runId, event.result, startedAt);
    }
    throw new ServiceError("INTERNAL", "The run ended without a result");
  },
});

export const agentsLogs = agentsDomain.method({
  name: "agents.logs",
  summary:
    "The agent's last `lines` log entries (default 100, at most 1000), newest last: invocations started and finished, steps, errors, transitions.",
  input: v.object({ agent_id: AgentId, lines: v.optional(queryInt(1, 1000), 100) }),
  auth: AUTH,
  output: v.object({
    agentId: v.string(),
    logs: v.array(v.object({ seq: v.number(), time: Timestamp, level: v.string(), event: v.string(), message: v.string() })),
  }),
  errors: { NOT_FOUND: {}, FORBIDDEN: {} },
  http: [{ surface: "gateway", method: "GET", path: "/agents/:agent_id/logs" }],
  async handler(params, ctx) {
    const agent = await owned(ctx, params.agent_id);
    const logs = await readAgentLogs(ctx.deps, agent.id, params.lines);
    return { agentId: agent.id, logs };
  },
});

export const agentsSubscribe = agentsDomain.method({
  name: "agents.subscribe",
  summary:
    "Watch the agent's runs, started on any instance: a `subscribed` event once watching, then each run's events " +
    "(status, chunk, step, done) with its runId, until the caller goes away. The agent stream's `subscribe` " +
    "message.",
  input: v.object({ agent_id: AgentId }),
  auth: AUTH,
  output: v.pipe(
    v.object({ type: v.string(), agentId: v.optional(v.string()), runId: v.optional(v.string()) }),
    v.description("Each SSE event: `subscribed`, then status, chunk, step and done events of runs"),
  ),
  errors: { NOT_FOUND: {}, FORBIDDEN: {} },
  http: [{ surface: "gateway", method: "GET", path: "/agents/:agent_id/events" }],
  stream: {},
  async handler(params, ctx) {
    const agent = await owned(ctx, params.agent_id);
    return watchRuns(ctx.deps, agent.id, ctx.signal);
  },
});

export const agentsCancel = agentsDomain.method({
  name: "agents.cancel",
  summary:
    "Cancel a running invocation of one of your agents, wherever it runs; it ends with status `cancelled`. A run " +
    "that ended, never existed or is another user's is 404. The agent stream's `cancel` message.",
  input: v.object({ run_id: v.pipe(v.string("run_id must be a string"), v.minLength(1, "run_id is required"), v.maxLength(128)) }),
  auth: AUTH,
  output: v.object({ runId: v.string(), agentId: v.string(), cancelled: v.boolean() }),
  errors: { NOT_FOUND: {} },
  http: [{ surface: "gateway", method: "POST", path: "/agents/runs/:run_id/cancel" }],
  async handler(params, ctx) {
    const { runId, agentId } = await cancelRun(ctx.deps, ctx.principal.userId, params.run_id, (agentId) =>
      requireAgent(ctx.deps, ctx.principal.userId, agentId, "member").then(
        () => true,
        () => false,
      ),
    );
    return { runId, agentId, cancelled: true };
  },
});

export const agentsDeploy = lifecycleMethod(
  "deploy",
  "Deploy the agent (idle or error → deployed); 409 from any other status (docs/agents.md state machine).",
);
export const agentsPause = lifecycleMethod(
  "pause",
  "Pause a deployed agent (deployed → paused); a paused agent refuses invocations with 409.",
);
export const agentsResume = lifecycleMethod("resume", "Resume a paused agent (paused → deployed).");

/** Gateway agents by id, run here (docs/interface.md 4.4 "API-gateway mode"); served when ORCH_BASE_URL is unset. */
export const localAgentMethods = [
  agentsList,
  agentsCreate,
  agentsGet,
  agentsUpdate,
  agentsDelete,
  agentsInvoke,
  agentsLogs,
  agentsSubscribe,
  agentsCancel,
  agentsDeploy,
  agentsPause,
  agentsResume,
];

export const agentsStreamConnect = agentsDomain.method({
  name: "agents.stream.connect",
  summary: "Admits an agent-stream socket (`WS /gateway/v1/agents/stream`, docs/interface.md 4.4): a session or Gateway key.",
  input: v.object({}),
  auth: AUTH,
  internal: true,
  http: [],
  // The socket holds a place among its user's and its tenant's open agent stream sockets
  // (QUOTA_AGENT_SOCKETS_PER_USER, _PER_TENANT; docs/quotas.md) until it closes: past either,
  // the upgrade is refused with 429.
  async handler(_params, ctx) {
    const { userId, tenantId } = await holderScopes(ctx.deps.users, ctx.principal);
    const scopes: PlaceScope[] = [];
    if (userId) scopes.push({ quota: "agent_sockets_per_user", set: "agent_sockets_per_user", scope: userId });
    if (tenantId) scopes.push({ quota: "agent_sockets_per_tenant", set: "agent_sockets_per_tenant", scope: tenantId });
    const place = await takePlaces(ctx.deps, scopes, ctx.deps.config.QUOTA_STREAM_LEASE_SECONDS * 1000, {
      code: "RATE_LIMITED",
      headers: { "retry-after": "1" },
    });
    // An upgrade the client abandons never opens nor closes: its places are given back unless the
    // socket opens (`opened()`) within 10 s.
    const abandoned = setTimeout(() => void place.release(), 10_000);
    abandoned.unref?.();
    return { userId: ctx.principal.userId, place: { release: place.release, opened: () => clearTimeout(abandoned) } };
  },
});

/**
 * The agent stream's gate, served in both agent modes: in orchestrator-proxy mode the socket
 * still opens and answers every message with a pointer to the orchestrator's stream.
 */
export const agentStreamMethods = [agentsStreamConnect];
