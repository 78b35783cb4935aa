import type { MockBehaviour } from "../../mocks/scripted-provider.js";

/**
 * The scripted model of the CLI tests (test/rpc/chat/claude-code.test.ts, codex.test.ts): asked
 * to run `[[run: <command>]]`, it calls the CLI's own shell tool with that command (Claude Code's
 * `Bash`, Codex's `exec_command`); given the tool's result, it answers `The tool said: <result>`.
 * It reads the request as the provider received it, in the chat completions or the Messages
 * wire format (mocks/openai-chat-upstream.ts, mocks/anthropic-upstream.ts), so it also shows
 * that the gateway carried the CLI's tools and its tool result across.
 */
export const runMarker = (command: string) => `[[run: ${command}]]`;

/** Each CLI's shell tool and the input it takes (from the recorded fixtures, test/fixtures/clients/). */
const SHELL_TOOLS: Record<string, (command: string) => Record<string, unknown>> = {
  Bash: (command) => ({ command, description: "Print a marker" }),
  exec_command: (command) => ({ cmd: command }),
};

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content
          .map((part: any) =>
            typeof part?.text === "string" ? part.text : typeof part?.content === "string" ? part.content : textOf(part?.content),
          )
          .join("\n")
      : "";

/** The tool results that end the conversation, in either wire format, or undefined. */
function trailingToolResult(body: any): string | undefined {
  const messages: any[] = body?.messages ?? [];
  const last = messages.at(-1);
  if (last?.role === "tool") return textOf(last.content);
  const results = Array.isArray(last?.content) ? last.content.filter((block: any) => block?.type === "tool_result") : [];
  return last?.role === "user" && results.length ? results.map((block: any) => textOf(block.content)).join("\n") : undefined;
}

function offeredTools(body: any): string[] {
  return (body?.tools ?? []).map((tool: any) => tool?.function?.name ?? tool?.name).filter(Boolean);
}

export function cliToolRoundTrip(body: any): MockBehaviour {
  const result = trailingToolResult(body);
  if (result !== undefined) return { kind: "turn", turn: { text: `The tool said: ${result.trim()}` } };
  const asked = (body?.messages ?? [])
    .filter((message: any) => message.role === "user")
    .map((message: any) => textOf(message.content))
    .join("\n");
  const command = /\[\[run: ([^\]]+)\]\]/.exec(asked)?.[1];
  const tool = offeredTools(body).find((name) => name in SHELL_TOOLS);
  if (!command || !tool) return { kind: "turn", turn: { text: `No command to run (tools: ${offeredTools(body).join(", ")})` } };
  return { kind: "turn", turn: { toolCalls: [{ id: `call_${tool}_1`, name: tool, input: SHELL_TOOLS[tool]!(command) }] } };
}
