import type { Principal } from "../auth.js";
import { ServiceError, toServiceError } from "../errors.js";
import type { ChatChunk, ProviderResult } from "../chat/types.js";
import { countPromptTokens, countTokens, usageOf } from "../chat/tokens.js";
import type { ToolDef } from "../tools/types.js";
import { newId } from "../../storage/ids.js";
import type { AgentRecord } from "../../storage/repos/agents.js";
import { runAgent, type AgentEvent, type AgentMessage, type RunDependencies, type RunResult } from "./run.js";
import { EventQueue } from "./queue.js";
import { agentTimestamp } from "../time.js";
import { appendAgentLog } from "./logs.js";
import { agentRunsChannel, trackRun, type AgentRunMessage } from "./runs.js";
import { requireAgent } from "./records.js";
import { lifecycleOf, runFinished, runStarted } from "./state.js";
import type { Hold } from "../money/money.js";
import type { RoutedModel } from "../chat/model-router.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { emitEvent } from "../event-sink.js";
import type { AgentsDeps } from "./deps.js";
import { allowanceOf, allowedBy } from "../allow-list.js";

/** The bus channel every event of every run of an agent is published on, as `{runId, event}`. */

export interface InvokeHandle {
  runId: string;
  /** The run's events in order, ending with `done`. The run goes on whether or not this is read. */
  events: AsyncIterable<AgentEvent>;
}

/**
 * Starts one invocation of the caller's agent: the model (through the router) is offered the
 * agent's tools as functions, tool calls run through the catalog (built-in, upstream MCP,
 * VM) and their results are fed back until the model answers or `config.maxSteps` rounds
 * have run (rpc/agents/run.ts). Refusals throw before anything starts: NOT_FOUND (not the
 * caller's agent), CONFLICT (paused), QUOTA_EXCEEDED (the tenant's month cannot cover the
 * first model turn: its hold is placed before anything starts), the router's
 * model errors. Every event is also published on `agentRunsChannel(agentId)`, so a client
 * on another instance can watch. `signal` cancels the run (it ends `cancelled`).
 */
export async function invokeAgent(
  deps: AgentsDeps,
  principal: Principal,
  agentId: string,
  input: string,
  signal: AbortSignal,
  trace: { traceparent?: string } = {},
): Promise<InvokeHandle> {
  const agent = await requireAgent(deps, principal.userId, agentId, "member");
  if ((await lifecycleOf(deps, agent.id)) === "paused") {
    throw new ServiceError("CONFLICT", "The agent is paused; resume it before invoking", { details: { status: "paused" } });
  }
  const tenant = await deps.tenants.getTenant(agent.tenantId);
  if (!tenant) throw new ServiceError("NOT_FOUND", `The agent's tenant no longer exists: ${agent.tenantId}`);
  // The caller's allow-lists hold an agent's run too (docs/access-control.md): its model, and the tools it may call.
  const allowance = await allowanceOf(deps, principal);
  const model = deps.models.resolve(agent.model, allowance.models);
  const turnHold = async (current: Tenant, messages: readonly AgentMessage[]): Promise<Hold> => {
    const prompt = countPromptTokens(messages);
    const output = agent.config.maxTokens ?? deps.models.outputCap(model, prompt);
    const hold = await deps.money.admitTenantTurn(current, prompt + output, prompt);
    // Each settled model turn is counted in the tenant's metering (docs/billing.md "Usage").
    let settled = false;
    return {
      // Like the hold, counted once however many times a turn's end is reported.
      settle: async (usage, cost) => {
        if (settled) return;
        settled = true;
        await hold.settle(usage, cost);
        await deps.money.recordUsage(
          undefined,
          { surface: "agent", model: agent.model, credits: false, agentId: agent.id, tenantId: agent.tenantId },
          usage,
          cost,
        );
      },
      release: () => {
        settled = true;
        return hold.release();
      },
    };
  };

  const messages: AgentMessage[] = [];
  if (agent.config.systemPrompt) messages.push({ role: "system", content: agent.config.systemPrompt });
  messages.push({ role: "user", content: input });
  // The first turn's hold is placed before the run starts, so a spent month is a 429 here.
  let firstHold: Hold | undefined = await turnHold(tenant, messages);

  const catalog = await deps.catalog.list({ scope: { tenantId: agent.tenantId, allowed: allowance.tools } });
  const tools: ToolDef[] = catalog.filter((tool) => agent.tools.includes(tool.name));
  const missing = agent.tools.filter((name) => !tools.some((tool) => tool.name === name));

  const runId = newId("run");
  const started = agentTimestamp();
  // Cancellable by `agents.cancel` from any instance, as well as by the caller going away.
  const tracked = await trackRun(deps, { runId, agentId: agent.id, userId: principal.userId, startedAt: started }, signal).catch(
    async (error) => {
      await firstHold?.release().catch(() => undefined);
      throw error;
    },
  );
  signal = tracked.signal;
  await deps.money.recordAgentRun(agent.tenantId, agent.id, agent.model);
  try {
    await runStarted(deps, agent.id, runId, deps.config.AGENT_RUN_LEASE_SECONDS * 1000);
  } catch (error) {
    await firstHold.release().catch(() => undefined);
    await tracked.untrack();
    throw error;
  }
  const queue = new EventQueue<AgentEvent>();
  try {
    emitEvent(deps, agent.tenantId, "agent.invoked", { agentId: agent.id, runId, model: agent.model });
    await appendAgentLog(deps, agent.id, {
      event: "invocation.started",
      message: `Invocation ${runId} started`,
      runId,
      data: {
        input: clip(input),
        model: agent.model,
        tools: tools.map((tool) => tool.name),
        ...(missing.length ? { unavailableTools: missing } : {}),
      },
    });
  } catch (error) {
    await runFinished(deps, agent.id, runId, true).catch(() => undefined);
    await firstHold.release().catch(() => undefined);
    await tracked.untrack();
    throw error;
  }

  const run: RunDependencies = {
    tools,
    maxSteps: agent.config.maxSteps,
    signal,
    async complete(request, turnSignal) {
      // A hold before every model turn, so a long run stops once the month cannot cover the next one.
      let hold = firstHold;
      firstHold = undefined;
      if (!hold) hold = await turnHold((await deps.tenants.getTenant(agent.tenantId)) ?? tenant, request.messages);
      let result: ProviderResult;
      try {
        result = await model.provider.complete(
          {
            model: agent.model,
            messages: request.messages,
            stream: true,
            ...(request.tools.length ? { tools: request.tools } : {}),
            ...(agent.config.temperature !== undefined ? { temperature: agent.config.temperature } : {}),
            ...(agent.config.maxTokens !== undefined ? { max_tokens: agent.config.maxTokens } : {}),
          },
          turnSignal,
          // The caller's trace context reaches the provider on every turn of the run.
          trace,
        );
      } catch (error) {
        await hold.release().catch(() => undefined);
        throw error;
      }
      return await metered(deps, hold, model, result, countPromptTokens(request.messages));
    },
    callTool(name, args, toolSignal) {
      // A tool the caller may not use is as unknown as a missing one.
      if (!allowedBy(allowance.tools, name)) return Promise.reject(new ServiceError("NOT_FOUND", `Unknown tool: ${name}`));
      const seconds = agent.config.toolTimeoutSeconds ?? deps.config.GATEWAY_TIMEOUT_SECONDS;
      // Upstream and VM tools answer only for the agent's own tenant (docs/architecture.md "Ownership").
      return deps.catalog.call(name, args, { timeoutMs: Math.round(seconds * 1000), signal: toolSignal, tenantId: agent.tenantId });
    },
  };

  void drive(deps, agent, runId, started, runAgent(run, messages), queue).finally(() => tracked.untrack());
  return { runId, events: queue };
}

/** Runs the loop to its end, whoever reads: logs, bus, state, then the reader's queue. */
async function drive(
  deps: AgentsDeps,
  agent: AgentRecord,
  runId: string,
  startedAt: string,
  run: AsyncGenerator<AgentEvent, RunResult>,
  queue: EventQueue<AgentEvent>,
): Promise<void> {
  const channel = agentRunsChannel(agent.id);
  const emit = (event: AgentEvent) => {
    queue.push(event);
    deps.store.bus.publish(channel, { runId, event } satisfies AgentRunMessage).catch(() => undefined);
  };
  let finished = false;
  try {
    for await (const event of run) {
      if (event.type === "step") {
        const { step } = event;
        await appendAgentLog(deps, agent.id, {
          level: step.error ? "error" : "info",
          event: "step",
          message: step.error ? `Tool ${step.tool} failed: ${step.error}` : `Tool ${step.tool} ran in ${step.durationMs} ms`,
          runId,
          data: {
            index: step.index,
            tool: step.tool,
            arguments: step.arguments,
            durationMs: step.durationMs,
            ...(step.error ? { error: step.error } : {}),
          },
        });
      }
      if (event.type === "done") {
        const { result } = event;
        await appendAgentLog(deps, agent.id, {
          level: result.status === "completed" ? "info" : "error",
          event: "invocation.finished",
          message: `Invocation ${runId} ended: ${result.status}${result.error ? ` (${result.error})` : ""}`,
          runId,
          data: {
            status: result.status,
            steps: result.steps.length,
            usage: result.usage,
            startedAt,
            ...(result.error ? { error: result.error } : {}),
          },
        });
        emitEvent(
          deps,
          agent.tenantId,
          result.status === "completed" ? "agent.completed" : result.status === "cancelled" ? "agent.cancelled" : "agent.failed",
          {
            agentId: agent.id,
            runId,
            status: result.status,
            steps: result.steps.length,
            ...(result.error ? { error: result.error } : {}),
          },
        );
        // The status is back before anyone sees `done`: a caller that reads the agent next sees it idle.
        finished = true;
        await runFinished(deps, agent.id, runId, result.status === "error");
      }
      emit(event);
    }
  } catch (error) {
    // Only storage can fail here (runAgent itself never throws): record it and end the run.
    const message = toServiceError(error).message;
    deps.log.error({ event: "agent.run", agentId: agent.id, runId, error: String(error) });
    if (!finished) {
      finished = true;
      await runFinished(deps, agent.id, runId, true).catch(() => undefined);
      emit({
        type: "done",
        result: {
          status: "error",
          output: "",
          steps: [],
          usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
          error: message,
        },
      });
    }
  } finally {
    if (!finished) await runFinished(deps, agent.id, runId, false).catch(() => undefined);
    queue.close();
  }
}

/**
 * Settles a model turn's hold to the tokens it reported, exactly once, however the turn ends.
 * A provider that reports no usage is counted by estimate (rpc/chat/tokens.ts) so the
 * allowance holds.
 */
async function metered(
  deps: AgentsDeps,
  hold: Hold,
  model: RoutedModel,
  result: ProviderResult,
  promptEstimate: number,
): Promise<ProviderResult> {
  // At the price of the deployment that answered (docs/providers.md "Money").
  const settle = (usage: ChatChunk["usage"] & object) =>
    hold.settle(usage, deps.models.cost(model, usage, result)).catch((error: unknown) => {
      deps.log.error({ event: "agent.metering", error: String(error) });
    });
  if (result.kind === "completion") {
    const usage = result.completion.usage;
    const content = result.completion.choices[0]?.message.content ?? "";
    await settle(usage ?? usageOf(promptEstimate, countTokens(content)));
    return result;
  }
  const source = result.chunks;
  async function* chunks(): AsyncGenerator<ChatChunk> {
    let text = "";
    try {
      for await (const chunk of source) {
        if (chunk.usage) await settle(chunk.usage);
        for (const choice of chunk.choices ?? []) {
          text += choice.delta?.content ?? "";
          for (const call of choice.delta?.tool_calls ?? []) text += (call.function?.name ?? "") + (call.function?.arguments ?? "");
        }
        yield chunk;
      }
    } finally {
      // Settled once: a no-op when the usage chunk came.
      await settle(usageOf(promptEstimate, countTokens(text)));
    }
  }
  return { kind: "stream", chunks: chunks() };
}

function clip(text: string, max = 2000): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
