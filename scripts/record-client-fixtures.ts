/**
 * `npm run clients:record [-- <client>…]`: records what the real clients of test/clients/ send
 * into test/fixtures/clients/<client>-<scenario>.json (docs/clients.md "Golden fixtures"). Each
 * client runs against a capture server on loopback (test/helpers/capture-server.ts) that answers
 * every dialect plausibly, so each scenario runs to its end (tool round trips included) and
 * every request it makes is recorded: path, dialect, headers (credentials redacted), body.
 * Run it again when a client moves (`npm run clients:update`); the diff is what changed.
 */
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type CaptureServer, type CapturedRequest, SCENARIO_PATH, startCaptureServer } from "../test/helpers/capture-server.js";
import { type CliRun, runClaudeCode, runCodexExec } from "../test/helpers/cli-clients.js";
import { clientVersion, runScenarios } from "../test/helpers/clients.js";
import { type ClientFixture, FIXTURES_DIR, fixtureFile } from "../test/helpers/fixtures.js";

const MODEL = "capture-model";
const KEY = "sk-capture-not-a-secret";

/** The SDK scenario scripts (test/clients/scenarios/*.mjs), each run once with all its scenarios. */
const SCRIPTS = ["openai", "anthropic", "ai-sdk", "langchain", "agents"];

/** What an SDK scenario does, from the suffix every script names its scenarios with. */
function describeScenario(client: string, scenario: string): string {
  const rules: [RegExp, string][] = [
    [/stream/, "a streamed answer to one user message"],
    [/tools/, "a function tool round trip: the model calls get_weather, the client runs it and sends the result back"],
    [/object|parse|structured|output$/, "structured output with a zod schema (city, temperature, conditions)"],
    [/count-tokens/, "counting the tokens of one user message"],
    [/embed/, "embeddings of text"],
  ];
  const what = rules.find(([pattern]) => pattern.test(scenario))?.[1] ?? "a plain answer to one user message";
  return `${client} ${scenario}: ${what}`;
}

interface CliScenario {
  client: "claude-code" | "codex";
  scenario: string;
  description: string;
  run(capture: CaptureServer): Promise<CliRun>;
}

const claude = (capture: CaptureServer, prompt: string, extra: Partial<Parameters<typeof runClaudeCode>[0]> = {}) =>
  runClaudeCode({ baseURL: capture.origin, key: KEY, auth: "bearer", model: MODEL, prompt, ...extra });
const codex = (capture: CaptureServer, prompt: string) => runCodexExec({ baseURL: capture.origin, key: KEY, model: MODEL, prompt });

const CLI_SCENARIOS: CliScenario[] = [
  {
    client: "claude-code",
    scenario: "prompt",
    description: "claude -p with a model id Claude Code does not know (a gateway catalog's): its main request",
    run: (capture) => claude(capture, "Reply with the words purple elephant"),
  },
  {
    client: "claude-code",
    scenario: "prompt-known-model",
    description: "claude -p with a model id Claude Code knows (claude-sonnet-4-6): thinking and tools as it sends them to Anthropic",
    run: (capture) => claude(capture, "Reply with the words purple elephant", { model: "claude-sonnet-4-6" }),
  },
  {
    client: "claude-code",
    scenario: "prompt-all-tools",
    description: "claude -p with tool search off (ENABLE_TOOL_SEARCH=false): every tool in the request, none deferred",
    run: (capture) => claude(capture, "Reply with the words purple elephant", { env: { ENABLE_TOOL_SEARCH: "false" } }),
  },
  {
    client: "claude-code",
    scenario: "tool-round-trip",
    description: "claude -p where the model calls Claude Code's Bash tool: the tool_use, then its tool_result sent back",
    run: (capture) =>
      claude(capture, 'Run the marker command: [[call:Bash {"command":"echo tool-ran-42","description":"Print a marker"}]]', {
        args: ["--allowedTools", "Bash"],
      }),
  },
  {
    client: "claude-code",
    scenario: "subagent",
    description: "claude -p where the model starts an Explore subagent (Agent tool): the subagent's own requests with its smaller tool set",
    run: (capture) =>
      claude(capture, 'Delegate: [[call:Agent {"description":"Look around","prompt":"Say hi","subagent_type":"Explore"}]]', {
        args: ["--allowedTools", "Agent"],
      }),
  },
  {
    client: "codex",
    scenario: "exec-prompt",
    description: "codex exec: its Responses request with its namespace and web_search tools",
    run: (capture) => codex(capture, "Reply with the words purple elephant"),
  },
  {
    client: "codex",
    scenario: "exec-tool-round-trip",
    description: "codex exec where the model calls its exec_command tool: the function_call, then its function_call_output sent back",
    run: (capture) => codex(capture, 'Run the marker command: [[call:exec_command {"cmd":"echo tool-ran-42"}]]'),
  },
];

const CLI_PACKAGES = { "claude-code": "@anthropic-ai/claude-code", codex: "@openai/codex" } as const;

/** Today's date as clients write it into prompts (UTC and local: a recording may straddle midnight in neither). */
const TODAY = [...new Set([new Date().toISOString().slice(0, 10), new Date().toLocaleDateString("sv")])];

/**
 * What makes one recording differ from the next without the client having changed is written
 * as a placeholder, so that the diff after `clients:record` is what the clients changed: the
 * run's temporary HOME (`$HOME`, also in the key Claude Code makes of a project's path,
 * `/tmp/x/work` → `-tmp-x-work`), ids minted per run (`<uuid>`, and Claude Code's 64-hex device
 * id `<hex64>`) and today's date (`<today>`). What the tools printed (Codex's chunk ids and wall
 * times, Claude Code's agent ids) and the order of Codex's `client_metadata` still vary.
 */
function fixtureOf(
  identity: Pick<ClientFixture, "client" | "version" | "packages" | "scenario" | "description">,
  requests: CapturedRequest[],
  home?: string,
): ClientFixture {
  let text = JSON.stringify({ ...identity, requests: requests.map(({ scenario: _, ...request }) => request) });
  if (home) text = text.replaceAll(home, "$HOME").replaceAll(home.replace(/[^a-zA-Z0-9]/g, "-"), "-$HOME");
  text = text
    .replace(/(?<![0-9a-f])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![0-9a-f])/gi, "<uuid>")
    .replace(/(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])/g, "<hex64>");
  for (const day of TODAY) text = text.replaceAll(day, "<today>");
  return JSON.parse(text);
}

/** Runs `jobs` two at a time: the machine has two cores, and a CLI run is mostly waiting. */
async function inPairs<T>(jobs: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const index = next++;
      results[index] = await jobs[index]!();
    }
  };
  await Promise.all([worker(), worker()]);
  return results;
}

async function withCapture<T>(use: (capture: CaptureServer) => Promise<T>): Promise<T> {
  const capture = await startCaptureServer();
  try {
    return await use(capture);
  } finally {
    await capture.close();
  }
}

const only = process.argv.slice(2);
const wanted = (client: string) => only.length === 0 || only.includes(client);
const failures: string[] = [];

const sdkJobs = SCRIPTS.map(
  (script) => () =>
    withCapture(async (capture) => {
      const report = await runScenarios(
        script,
        { baseURL: capture.origin, apiKey: KEY, model: MODEL, announceURL: capture.origin + SCENARIO_PATH },
        { timeoutMs: 120_000 },
      );
      if (!wanted(report.client)) return [];
      return Object.entries(report.results).map(([scenario, outcome]) => {
        if (!outcome.ok) failures.push(`${report.client} ${scenario}: ${outcome.error.message}`);
        const requests = capture.requests.filter((request) => request.scenario === scenario);
        const { client, version, packages } = report;
        return fixtureOf({ client, version, packages, scenario, description: describeScenario(client, scenario) }, requests);
      });
    }),
);
const cliJobs = CLI_SCENARIOS.filter((cli) => wanted(cli.client)).map(
  (cli) => () =>
    withCapture(async (capture) => {
      const run = await cli.run(capture);
      if (run.code !== 0)
        failures.push(`${cli.client} ${cli.scenario}: exit ${run.code}${run.timedOut ? " (timed out)" : ""}\n${run.stdout}\n${run.stderr}`);
      const identity = {
        client: cli.client,
        version: clientVersion(CLI_PACKAGES[cli.client]),
        scenario: cli.scenario,
        description: cli.description,
      };
      return [fixtureOf(identity, capture.requests, run.home)];
    }),
);

const started = performance.now();
const fixtures = (await inPairs<ClientFixture[]>([...cliJobs, ...sdkJobs])).flat();
mkdirSync(FIXTURES_DIR, { recursive: true });
const written = new Set<string>();
for (const fixture of fixtures) {
  const file = fixtureFile(fixture.client, fixture.scenario);
  writeFileSync(join(FIXTURES_DIR, file), `${JSON.stringify(fixture, null, 2)}\n`);
  written.add(file);
  process.stdout.write(`${file.padEnd(52)} ${fixture.version.padEnd(10)} ${fixture.requests.length} request(s)\n`);
}
const stale = only.length ? [] : readdirSync(FIXTURES_DIR).filter((file) => file.endsWith(".json") && !written.has(file));
if (stale.length) process.stdout.write(`\nNot recorded this time (a scenario renamed or removed?): ${stale.join(", ")}\n`);
process.stdout.write(`\n${written.size} fixtures in ${Math.round((performance.now() - started) / 1000)} s\n`);
if (failures.length) {
  process.stderr.write(`\n${failures.length} scenarios did not finish (their fixtures hold what was sent):\n${failures.join("\n")}\n`);
  process.exit(1);
}
