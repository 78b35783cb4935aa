import { afterAll, beforeAll, expect } from "vitest";
import { createAnthropicUpstream } from "../../mocks/anthropic-upstream.js";
import { createOpenAiChatUpstream } from "../../mocks/openai-chat-upstream.js";
import type { MockBehaviour } from "../../mocks/scripted-provider.js";
import { type RegisteredUser, twoCallers, type UsageRow, usageOf } from "./chat.js";
import { mockUpstreams } from "./mock-upstreams.js";
import { bearer, startTestServer, type TestServer } from "./server.js";

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

/**
 * The service the CLI tests drive: the echo model, an OpenAI-compatible model (`gpt`) and an
 * Anthropic one (`claude`) on msw mocks scripted with cliToolRoundTrip, and two users of two
 * tenants: alice with a gateway key named `keyName`, bob with a personal key. Registers the
 * file's beforeAll and afterAll; the fields are set once beforeAll ran (the mocks at once).
 */
export interface CliService {
  openai: ReturnType<typeof createOpenAiChatUpstream>;
  anthropic: ReturnType<typeof createAnthropicUpstream>;
  server: TestServer;
  alice: RegisteredUser;
  bob: RegisteredUser;
  gatewayKey: string;
  bobKey: string;
}

export function cliService(keyName: string): CliService {
  const OPENAI = "https://api.openai.test/v1";
  const ANTHROPIC = "https://api.anthropic.test";
  const openai = createOpenAiChatUpstream(OPENAI);
  const anthropic = createAnthropicUpstream(ANTHROPIC);
  const msw = mockUpstreams(...openai.handlers, ...anthropic.handlers);
  const service = { openai, anthropic } as CliService;
  beforeAll(async () => {
    await msw.listen();
    service.server = await startTestServer({
      MODELS_JSON: JSON.stringify({
        models: {
          "echo-1": { provider: "echo" },
          gpt: { provider: "openai-compatible", baseURL: msw.url(OPENAI), upstreamModel: "gpt-test" },
          claude: { provider: "anthropic", baseURL: msw.url(ANTHROPIC), upstreamModel: "claude-test" },
        },
      }),
    });
    Object.assign(service, await twoCallers(service.server, keyName));
    const created = await service.server.request("/gateway/v1/auth/keys", {
      method: "POST",
      headers: bearer(service.alice.token),
      json: { name: keyName },
    });
    service.gatewayKey = created.body.key;
    openai.script("gpt-test", cliToolRoundTrip);
    anthropic.script("claude-test", cliToolRoundTrip);
  });
  afterAll(async () => {
    await service.server?.close();
    await msw.close();
  });
  return service;
}

/**
 * What a CLI run that used its shell tool (its command printing `<tag>-ran-42`) left behind: every
 * request of it came through `operation` for `model` and was answered, each metered on `user`
 * since `before`; and when a scripted upstream answered, the CLI's `tool` reached it and the
 * tool's result came back.
 */
export async function expectToolRoundTrip(
  service: CliService,
  run: { operation: string; model: string; user: RegisteredUser; before: UsageRow; tag: string; tool: string },
  upstream: CliService["openai"] | CliService["anthropic"] | undefined,
): Promise<void> {
  const lines = service.server.logs().filter((line) => line.operation === run.operation && line.model === run.model);
  expect(lines.length).toBeGreaterThanOrEqual(2);
  expect(lines.map((line) => line.status)).toEqual(lines.map(() => 200));
  const after = await usageOf(service.server, run.user.token, run.model);
  expect(after.requests - run.before.requests).toBe(lines.length);
  expect(after.inputTokens).toBeGreaterThan(run.before.inputTokens);
  if (upstream) {
    const calls = upstream.calls.filter((call) => call.raw.includes(`${run.tag}-ran-`));
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(JSON.stringify(calls[0]!.body.tools)).toContain(`"${run.tool}"`);
    expect(JSON.stringify(calls.at(-1)!.body.messages)).toContain(`${run.tag}-ran-42`);
  }
}
