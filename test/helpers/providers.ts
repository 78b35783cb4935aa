import { loadModels, type SingleModelConfig as ModelConfig } from "../../rpc/chat/models-config.js";
import { createProvider } from "../../rpc/chat/providers/index.js";
import type { ChatChunk, ChatCompletion, Provider, ProviderResult, ToolCall, Usage } from "../../rpc/chat/types.js";

/** A model entry parsed as the service parses it (defaults applied), and its adapter. */
export function providerFor(
  id: string,
  entry: Record<string, unknown>,
  env: Record<string, string | undefined> = {},
  timeoutSeconds = 5,
): { provider: Provider; config: ModelConfig } {
  const config = loadModels({ MODELS_FILE: undefined, MODELS_JSON: JSON.stringify({ models: { [id]: entry } }) })[id] as ModelConfig;
  return { provider: createProvider(id, config, { timeoutSeconds, env }), config };
}

export function completionOf(result: ProviderResult): ChatCompletion {
  if (result.kind !== "completion") throw new Error(`expected a completion, got a ${result.kind}`);
  return result.completion;
}

/** Every chunk of a streamed result, and the error that ended it if one did. */
export async function drainStream(result: ProviderResult): Promise<{ chunks: ChatChunk[]; error?: unknown }> {
  if (result.kind !== "stream") throw new Error(`expected a stream, got a ${result.kind}`);
  const chunks: ChatChunk[] = [];
  try {
    for await (const chunk of result.chunks) chunks.push(chunk);
  } catch (error) {
    return { chunks, error };
  }
  return { chunks };
}

/** What a client assembles from the chunks: text, tool calls by index, finish reason, usage. */
export function assemble(chunks: ChatChunk[]): {
  role?: string;
  content: string;
  toolCalls: ToolCall[];
  finish?: string | null;
  usage?: Usage | null;
} {
  let role: string | undefined;
  let content = "";
  let finish: string | null | undefined;
  let usage: Usage | null | undefined;
  const calls: ToolCall[] = [];
  for (const chunk of chunks) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices ?? []) {
      role ??= choice.delta?.role;
      if (typeof choice.delta?.content === "string") content += choice.delta.content;
      for (const delta of choice.delta?.tool_calls ?? []) {
        const index = delta.index ?? 0;
        calls[index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
        const call = calls[index]!;
        if (delta.id) call.id = delta.id;
        if (delta.function?.name) call.function.name += delta.function.name;
        if (delta.function?.arguments) call.function.arguments += delta.function.arguments;
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { role, content, toolCalls: calls, finish, usage };
}

/** A request that exercises the tool fields: tools offered, a call made, its result fed back. */
export const TOOL_CONVERSATION = {
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Weather in Paris and Rome?" },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "call_1", type: "function" as const, function: { name: "weather", arguments: '{"city":"Paris"}' } },
        { id: "call_2", type: "function" as const, function: { name: "weather", arguments: '{"city":"Rome"}' } },
      ],
    },
    { role: "tool", tool_call_id: "call_1", content: '{"temp":21}' },
    { role: "tool", tool_call_id: "call_2", content: "sunny" },
  ],
  tools: [
    {
      type: "function" as const,
      function: {
        name: "weather",
        description: "Current weather of a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
      },
    },
  ],
};
