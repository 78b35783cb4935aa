import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { claudeBinary, codexCommand, freshHome, isolatedEnv, limitConcurrency, type ProcessResult, runProcess } from "./clients.js";

/**
 * Claude Code and the Codex CLI from test/clients/ run as a user would point them at a gateway
 * (docs/clients.md "Claude Code", "Codex CLI"), each in a fresh HOME with a project folder
 * (`$HOME/work`) as its working directory, bounded in time (test/helpers/clients.ts), two at
 * a time in a test process however many a test file starts at once.
 */
const cliSlot = limitConcurrency(2);
export interface CliRun extends ProcessResult {
  /** The run's HOME, already removed: fixtures write it `$HOME`. */
  home: string;
}

function inFreshHome(prefix: string, run: (home: string, work: string) => Promise<ProcessResult>): Promise<CliRun> {
  return cliSlot(() => inFreshHomeNow(prefix, run));
}

async function inFreshHomeNow(prefix: string, run: (home: string, work: string) => Promise<ProcessResult>): Promise<CliRun> {
  const home = await freshHome(prefix);
  try {
    const work = join(home.path, "work");
    await mkdir(work);
    return { ...(await run(home.path, work)), home: home.path };
  } finally {
    await home.remove();
  }
}

export interface ClaudeCodeOptions {
  /** ANTHROPIC_BASE_URL: the surface root without /v1 (Claude Code appends /v1/messages). */
  baseURL: string;
  /** The key, sent as `Authorization: Bearer` (ANTHROPIC_AUTH_TOKEN) or as `x-api-key` (ANTHROPIC_API_KEY). */
  key: string;
  auth: "bearer" | "x-api-key";
  model: string;
  prompt: string;
  /** More arguments after `-p <prompt> --model <model>` (`--allowedTools Bash`). */
  args?: string[];
  env?: Record<string, string>;
  timeoutMs?: number;
}

/** `claude -p <prompt> --model <model>`; its small background model is the same model (ANTHROPIC_DEFAULT_HAIKU_MODEL). */
export function runClaudeCode(options: ClaudeCodeOptions): Promise<CliRun> {
  return inFreshHome("claude-code-", async (home, work) =>
    runProcess(claudeBinary(), ["-p", options.prompt, "--model", options.model, ...(options.args ?? [])], {
      cwd: work,
      timeoutMs: options.timeoutMs ?? 60_000,
      env: await isolatedEnv(home, {
        ANTHROPIC_BASE_URL: options.baseURL,
        ...(options.auth === "bearer" ? { ANTHROPIC_AUTH_TOKEN: options.key } : { ANTHROPIC_API_KEY: options.key }),
        ANTHROPIC_DEFAULT_HAIKU_MODEL: options.model,
        ANTHROPIC_SMALL_FAST_MODEL: options.model,
        ...options.env,
      }),
    }),
  );
}

export interface CodexOptions {
  /** The provider's `base_url`: the surface root; `/v1` is appended (Codex then calls `/v1/responses`). */
  baseURL: string;
  key: string;
  model: string;
  prompt: string;
  timeoutMs?: number;
}

/**
 * `$CODEX_HOME/config.toml` for a gateway: a model provider with the Responses wire API (the only
 * one Codex offers) and the key in an environment variable (`env_key`), so no login is needed;
 * and the switches that keep Codex offline. Without them it checks for updates, sends analytics
 * (ab.chatgpt.com) and syncs plugins (github.com, api.github.com, chatgpt.com) at every start;
 * all of those fail harmlessly at the closed proxy, but a run that reaches for nothing is one
 * whose requests are all the gateway's.
 */
export function codexConfig(options: Pick<CodexOptions, "baseURL" | "model">): string {
  return [
    `model = ${JSON.stringify(options.model)}`,
    `model_provider = "gateway"`,
    "check_for_update_on_startup = false",
    "",
    "[model_providers.gateway]",
    `name = "Gateway"`,
    `base_url = ${JSON.stringify(`${options.baseURL}/v1`)}`,
    `env_key = "GATEWAY_API_KEY"`,
    `wire_api = "responses"`,
    "",
    "[analytics]",
    "enabled = false",
    "",
    "[feedback]",
    "enabled = false",
    "",
    "[features]",
    "plugins = false",
    "",
  ].join("\n");
}

/**
 * `codex exec --skip-git-repo-check <prompt>` (test/helpers/clients.ts `codexCommand`; the working
 * directory is not a git repository; Codex refuses to run outside one or a trusted folder
 * without the flag). Its default sandbox (read-only) and approval policy (`never` in exec) apply.
 */
export function runCodexExec(options: CodexOptions): Promise<CliRun> {
  return inFreshHome("codex-", async (home, work) => {
    const codexHome = join(home, ".codex");
    await mkdir(codexHome);
    await writeFile(join(codexHome, "config.toml"), codexConfig(options));
    const [command, ...launcher] = codexCommand();
    return runProcess(command, [...launcher, "exec", "--skip-git-repo-check", options.prompt], {
      cwd: work,
      timeoutMs: options.timeoutMs ?? 60_000,
      env: await isolatedEnv(home, { CODEX_HOME: codexHome, GATEWAY_API_KEY: options.key }),
    });
  });
}
