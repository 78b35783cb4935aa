import type { ToolDef, ToolResult } from "../tools/types.js";
import { schemaIssues } from "../tools/validate-args.js";
import { toServiceError } from "../errors.js";
import type { ChatChunk, ProviderResult, Usage } from "../chat/types.js";

export interface AgentToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A message of the agent's conversation: the chat wire format with tool calls. */
export interface AgentMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string | null;
  tool_calls?: AgentToolCall[];
  tool_call_id?: string;
}

export interface FunctionTool {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface AgentStep {
  index: number;
  tool: string;
  arguments: unknown;
  result: ToolResult | null;
  error: string | null;
  durationMs: number;
}

/** How a run ended. `max_steps`: the model still asked for tools after `maxSteps` rounds. */
export type RunOutcome = "completed" | "max_steps" | "error" | "cancelled";

export interface RunResult {
  status: RunOutcome;
  output: string;
  steps: AgentStep[];
  usage: Usage;
  error?: string;
}

export type AgentEvent =
  | { type: "status"; status: "running" }
  | { type: "chunk"; content: string }
  | { type: "step"; step: AgentStep }
  | { type: "done"; result: RunResult };

export interface RunDependencies {
  /** One model turn with the tools offered as functions, streamed. */
  complete(request: { messages: AgentMessage[]; tools: FunctionTool[] }, signal: AbortSignal): Promise<ProviderResult>;
  /** Runs one catalog tool. */
  callTool(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult>;
  tools: ToolDef[];
  maxSteps: number;
  signal: AbortSignal;
}

const ZERO: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

function addUsage(a: Usage, b: Usage | null | undefined): Usage {
  if (!b) return a;
  return {
    prompt_tokens: a.prompt_tokens + (b.prompt_tokens ?? 0),
    completion_tokens: a.completion_tokens + (b.completion_tokens ?? 0),
    total_tokens: a.total_tokens + (b.total_tokens ?? 0),
  };
}

/** The text a tool result shows the model. */
export function resultText(result: ToolResult): string {
  const text = result.content.map((part) => (part.type === "text" ? (part.text ?? "") : JSON.stringify(part))).join("\n");
  return result.isError ? `Error: ${text}` : text;
}

interface Turn {
  content: string;
  toolCalls: AgentToolCall[];
  usage: Usage | null;
}

/** Reads one model turn, passing content deltas on as they arrive and assembling tool-call deltas. */
async function* readTurn(result: ProviderResult): AsyncGenerator<string, Turn> {
  if (result.kind === "completion") {
    const message = result.completion.choices[0]?.message as { content: string | null; tool_calls?: AgentToolCall[] } | undefined;
    const content = message?.content ?? "";
    if (content) yield content;
    return { content, toolCalls: message?.tool_calls ?? [], usage: result.completion.usage ?? null };
  }
  let content = "";
  let usage: Usage | null = null;
  const calls: AgentToolCall[] = [];
  for await (const chunk of result.chunks as AsyncIterable<ChatChunk>) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta as
        | { content?: string | null; tool_calls?: { index?: number; id?: string; function?: { name?: string; arguments?: string } }[] }
        | undefined;
      if (delta?.content) {
        content += delta.content;
        yield delta.content;
      }
      for (const part of delta?.tool_calls ?? []) {
        const index = part.index ?? calls.length;
        const call = (calls[index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
        if (part.id) call.id = part.id;
        if (part.function?.name) call.function.name += part.function.name;
        if (part.function?.arguments) call.function.arguments += part.function.arguments;
      }
    }
  }
  return { content, toolCalls: calls.filter(Boolean).map((call, i) => ({ ...call, id: call.id || `call_${i}` })), usage };
}

/**
 * The tool-calling loop: the model is offered the agent's tools as functions; each tool call
 * is run through the catalog (arguments checked against the tool's schema first) and its
 * result, or its error, fed back — until the model answers without tools or `maxSteps`
 * rounds of tools have run. Never throws: every ending is a `done` event with a status.
 */
export async function* runAgent(deps: RunDependencies, messages: AgentMessage[]): AsyncGenerator<AgentEvent, RunResult> {
  yield { type: "status", status: "running" };
  const byName = new Map(deps.tools.map((tool) => [tool.name, tool]));
  const functions: FunctionTool[] = deps.tools.map((tool) => ({
    type: "function",
    function: { name: tool.name, description: tool.description, parameters: tool.inputSchema },
  }));
  const conversation = [...messages];
  const steps: AgentStep[] = [];
  let usage = ZERO;
  let output = "";

  const finish = (status: RunOutcome, error?: string): RunResult => ({ status, output, steps, usage, ...(error ? { error } : {}) });

  try {
    for (let round = 0; ; round++) {
      if (deps.signal.aborted) return yield* done(finish("cancelled", "The run was cancelled"));
      const turnReader = readTurn(await deps.complete({ messages: conversation, tools: functions }, deps.signal));
      let next = await turnReader.next();
      while (!next.done) {
        yield { type: "chunk", content: next.value };
        next = await turnReader.next();
      }
      const turn = next.value;
      usage = addUsage(usage, turn.usage);
      output = turn.content;
      if (turn.toolCalls.length === 0) return yield* done(finish("completed"));
      if (round >= deps.maxSteps) {
        return yield* done(finish("max_steps", `The model still asked for tools after ${deps.maxSteps} rounds`));
      }
      conversation.push({ role: "assistant", content: turn.content || null, tool_calls: turn.toolCalls });
      for (const call of turn.toolCalls) {
        const step = await runStep(deps, byName, call, steps.length);
        steps.push(step);
        yield { type: "step", step };
        conversation.push({
          role: "tool",
          tool_call_id: call.id,
          content: step.error ? `Error: ${step.error}` : resultText(step.result!),
        });
      }
    }
  } catch (error) {
    if (deps.signal.aborted) return yield* done(finish("cancelled", "The run was cancelled"));
    return yield* done(finish("error", toServiceError(error).message));
  }
}

async function* done(result: RunResult): AsyncGenerator<AgentEvent, RunResult> {
  yield { type: "done", result };
  return result;
}

async function runStep(deps: RunDependencies, tools: Map<string, ToolDef>, call: AgentToolCall, index: number): Promise<AgentStep> {
  const started = performance.now();
  const step = (fields: Partial<AgentStep>): AgentStep => ({
    index,
    tool: call.function.name,
    arguments: null,
    result: null,
    error: null,
    durationMs: Math.round((performance.now() - started) * 100) / 100,
    ...fields,
  });
  let args: unknown;
  try {
    args = call.function.arguments.trim() ? JSON.parse(call.function.arguments) : {};
  } catch {
    return step({ arguments: call.function.arguments, error: "The arguments are not valid JSON" });
  }
  const tool = tools.get(call.function.name);
  if (!tool)
    return step({
      arguments: args,
      error: `Unknown tool: ${call.function.name}; this agent may use ${[...tools.keys()].join(", ") || "no tools"}`,
    });
  const issues = schemaIssues(tool.inputSchema, args);
  if (issues.length)
    return step({ arguments: args, error: `Invalid arguments: ${issues.map((i) => `${i.path || "(root)"} ${i.message}`).join("; ")}` });
  try {
    const result = await deps.callTool(tool.name, args as Record<string, unknown>, deps.signal);
    return step({ arguments: args, result, error: result.isError ? resultText({ ...result, isError: false }) : null });
  } catch (error) {
    return step({ arguments: args, error: toServiceError(error).message });
  }
}
