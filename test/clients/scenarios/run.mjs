// The runner every scenario script shares (docs/clients.md): reads its input (JSON) from
// stdin, runs the scenarios asked for (`only`, or all of them) one after the other, each bounded
// in time, and prints one JSON line: the client, its version, and each scenario's outcome
// (`{ok: true, value}` or `{ok: false, error}`). A failing scenario never stops the others.
import { readFileSync } from "node:fs";

/** Defaults the scenarios share, so that a gateway test and the capture server drive them the same way. */
export const DEFAULTS = {
  prompt: "Reply with the words purple elephant",
  // The echo model's tool directive (docs/models-and-chat.md "Tool calls"); the capture server reads it too.
  toolPrompt: '/tool get_weather {"city":"Oslo"}',
  // It says "JSON" (OpenAI refuses JSON mode otherwise); in JSON mode the echo model answers with the object it carries.
  objectPrompt: 'Answer in JSON: {"city":"Oslo","temperature":21,"conditions":"sunny"}',
};

/** The weather tool of every tool scenario, and what it answers. */
export const WEATHER_TOOL = {
  name: "get_weather",
  description: "The weather in a city today",
  parameters: {
    type: "object",
    properties: { city: { type: "string", description: "The city" } },
    required: ["city"],
    additionalProperties: false,
  },
};
export const weatherIn = (city) => `Sunny and 21 degrees in ${city}`;

export function versionOf(pkg) {
  return JSON.parse(readFileSync(new URL(`../node_modules/${pkg}/package.json`, import.meta.url), "utf8")).version;
}

async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function errorOf(error) {
  const status = typeof error?.status === "number" ? error.status : typeof error?.statusCode === "number" ? error.statusCode : undefined;
  const message = String(error?.message ?? error).slice(0, 2000);
  return { name: error?.name, message, ...(status !== undefined ? { status } : {}) };
}

/**
 * @param {string} client the name the report carries
 * @param {string[]} packages the npm packages the scenarios use; the first one's version is the client's
 * @param {(input: any) => Record<string, () => Promise<unknown>>} define the scenarios, given the input
 *
 * With `models` in the input, the scenarios run once per model, in one process (starting Node and
 * importing an SDK cost more than most scenarios), and each result is named `<model>/<scenario>`.
 */
export async function run(client, packages, define) {
  const input = await readInput();
  const results = {};
  for (const model of input.models ?? [input.model]) {
    const scenarios = define({ ...DEFAULTS, ...input, model });
    for (const name of input.only ?? Object.keys(scenarios)) {
      const key = input.models ? `${model}/${name}` : name;
      results[key] = await outcome(name, scenarios[name], client, input);
    }
  }
  const versions = Object.fromEntries(packages.map((pkg) => [pkg, versionOf(pkg)]));
  process.stdout.write(`${JSON.stringify({ client, version: versions[packages[0]], packages: versions, results })}\n`);
  // An SDK's keep-alive sockets must not hold the process open.
  process.exit(0);
}

/** One scenario's outcome, bounded in time; a failure is reported, never thrown. */
async function outcome(name, scenario, client, input) {
  if (!scenario) return { ok: false, error: { message: `No scenario ${name} in ${client}` } };
  // A capture server (scripts/record-client-fixtures.ts) files what follows under this scenario.
  if (input.announceURL) await fetch(input.announceURL, { method: "POST", body: name });
  let timer;
  try {
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${name} took longer than ${input.scenarioTimeoutMs ?? 20_000} ms`)),
        input.scenarioTimeoutMs ?? 20_000,
      );
    });
    return { ok: true, value: await Promise.race([scenario(), timeout]) };
  } catch (error) {
    return { ok: false, error: errorOf(error) };
  } finally {
    clearTimeout(timer);
  }
}
