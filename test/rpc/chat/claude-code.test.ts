import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOpenAiChatUpstream } from "../../../mocks/openai-chat-upstream.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";

/**
 * Claude Code itself (`@anthropic-ai/claude-code` from npm) pointed at the Gateway as
 * docs/dialects.md "Claude Code" says: `ANTHROPIC_BASE_URL` is the Gateway's origin plus
 * `/gateway` (it appends `/v1/messages`), `ANTHROPIC_AUTH_TOKEN` a gateway key, `--model` an
 * id of the catalog. It runs in print mode with a fresh HOME, its telemetry, updater and
 * non-essential traffic off, and every connection beyond loopback sent to a closed port. The
 * echo model answers it, and so does an OpenAI-compatible model (msw speaking chat completions)
 * that drives one of Claude Code's own tools.
 */

const OPENAI = "https://api.openai.test/v1";
const openai = createOpenAiChatUpstream(OPENAI);
const msw = mockUpstreams(...openai.handlers);

const CLI = join(dirname(createRequire(import.meta.url).resolve("@anthropic-ai/claude-code/package.json")), "cli.js");

let server: TestServer;
let home: string;
let key: string;
let token: string;

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({
      models: {
        "echo-1": { provider: "echo" },
        gpt: { provider: "openai-compatible", baseURL: msw.url(OPENAI), upstreamModel: "gpt-test" },
      },
    }),
  });
  const user = await registerUser(server);
  token = user.token;
  const created = await server.request("/gateway/v1/auth/keys", {
    method: "POST",
    headers: bearer(user.token),
    json: { name: "claude code" },
  });
  key = created.body.key;
  home = await mkdtemp(join(tmpdir(), "claude-code-home-"));
});

afterAll(async () => {
  await server?.close();
  await msw.close();
  await rm(home, { recursive: true, force: true });
});

/** Runs `claude -p <prompt> --model <model>` and resolves with its exit code and output; killed after `timeoutMs`. */
function claude(args: string[], env: Record<string, string>, timeoutMs = 60_000) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: home,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: home,
        XDG_CONFIG_HOME: join(home, ".config"),
        DISABLE_TELEMETRY: "1",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_ERROR_REPORTING: "1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        // Nothing leaves loopback: any other destination meets a closed port.
        HTTPS_PROXY: "http://127.0.0.1:9",
        HTTP_PROXY: "http://127.0.0.1:9",
        NO_PROXY: "127.0.0.1,localhost",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("Claude Code through the service", () => {
  it("claude -p answers through POST /gateway/v1/messages with a gateway key (ANTHROPIC_AUTH_TOKEN), metered on the key", async () => {
    const result = await claude(["-p", "Reply with the words purple elephant", "--model", "echo-1"], {
      ANTHROPIC_BASE_URL: server.url("/gateway"),
      ANTHROPIC_AUTH_TOKEN: key,
      ANTHROPIC_SMALL_FAST_MODEL: "echo-1",
      ANTHROPIC_DEFAULT_HAIKU_MODEL: "echo-1",
    });
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    // The echo model answers with the last user turn, which carries the prompt.
    expect(result.stdout).toContain("purple elephant");
    const calls = server.logs().filter((line) => line.operation === "gateway.messages.create");
    expect(calls.length).toBeGreaterThan(0);
    expect(calls.every((line) => line.status === 200 && line.path === "/gateway/v1/messages" && line.model === "echo-1")).toBe(true);
    const usage = await server.request("/gateway/v1/usage/keys", { headers: bearer(token) });
    const row = (usage.body.rows as { keyId: string; requests: number; inputTokens: number }[]).find((entry) => entry.requests > 0);
    expect(row).toMatchObject({ requests: calls.length });
    expect(row!.inputTokens).toBeGreaterThan(0);
  }, 90_000);

  it("claude -p answers through POST /account/v1/messages with a personal key (ANTHROPIC_API_KEY, sent as x-api-key)", async () => {
    const personal = await server.request("/account/v1/keys", { method: "POST", headers: bearer(token), json: { name: "claude code" } });
    const result = await claude(["-p", "Reply with the words green giraffe", "--model", "echo-1"], {
      ANTHROPIC_BASE_URL: server.url("/account"),
      ANTHROPIC_API_KEY: personal.body.key,
      ANTHROPIC_SMALL_FAST_MODEL: "echo-1",
      ANTHROPIC_DEFAULT_HAIKU_MODEL: "echo-1",
    });
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stdout).toContain("green giraffe");
    const calls = server.logs().filter((line) => line.operation === "account.messages.create");
    expect(calls.length).toBeGreaterThan(0);
    expect(calls.every((line) => line.status === 200)).toBe(true);
  }, 90_000);

  it("an OpenAI-compatible model behind the Gateway drives Claude Code's Bash tool: tool_use out, tool_result back", async () => {
    openai.reset();
    openai.script("gpt-test", (body) => {
      const result = body.messages.find((message: { role: string }) => message.role === "tool");
      if (!result)
        return {
          kind: "turn",
          turn: {
            toolCalls: [{ id: "call_bash_1", name: "Bash", input: { command: "echo tool-ran-$((40+2))", description: "Print a marker" } }],
          },
        };
      return { kind: "turn", turn: { text: `The tool said: ${String(result.content).trim()}` } };
    });
    const result = await claude(["-p", "Run the marker command", "--model", "gpt", "--allowedTools", "Bash"], {
      ANTHROPIC_BASE_URL: server.url("/gateway"),
      ANTHROPIC_AUTH_TOKEN: key,
      ANTHROPIC_SMALL_FAST_MODEL: "echo-1",
      ANTHROPIC_DEFAULT_HAIKU_MODEL: "echo-1",
    });
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stdout).toContain("The tool said: tool-ran-42");
    const calls = openai.calls.filter((call) => call.body.model === "gpt-test");
    expect(calls.length).toBeGreaterThanOrEqual(2);
    // Claude Code's tools reached the model as functions, and its tool_result came back as a tool message.
    expect(calls[0]!.body.tools.map((tool: { function: { name: string } }) => tool.function.name)).toContain("Bash");
    expect(calls.at(-1)!.body.messages).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ role: "assistant", tool_calls: [expect.objectContaining({ id: "call_bash_1" })] }),
        expect.objectContaining({ role: "tool", tool_call_id: "call_bash_1" }),
      ]),
    );
  }, 90_000);

  it("a wrong key ends claude -p with the gateway's refusal, in Anthropic's envelope", async () => {
    const result = await claude(["-p", "hello", "--model", "echo-1"], {
      ANTHROPIC_BASE_URL: server.url("/gateway"),
      ANTHROPIC_AUTH_TOKEN: "sk_not_a_key",
      ANTHROPIC_SMALL_FAST_MODEL: "echo-1",
      // Claude Code retries a refused request with backoff (ten times by default): once is enough here.
      CLAUDE_CODE_MAX_RETRIES: "0",
    });
    expect(result.code).not.toBe(0);
    expect(`${result.stdout}${result.stderr}`).toMatch(/401|auth|API key|Invalid/i);
    expect(server.logs().some((line) => line.path === "/gateway/v1/messages" && line.status === 401)).toBe(true);
  }, 90_000);
});
