// Runs before `npm start`, `npm run admin` and `npm run vm-agent` (npm's pre-scripts): compiles
// the TypeScript sources to dist/ when dist/ is missing or older than any source, so a fresh
// clone needs only `npm install && npm start` while the process that serves runs compiled
// JavaScript (no transpiler at start, one process that receives the signals). A deployment
// runs `npm run build` once in its image; this check then finds nothing to do (a few ms).
//
// Several of these may start at once (`npm start` beside `npm run admin`, or the test suite's
// processes on a fresh clone): they take a lock on the checkout (proper-lockfile, .build.lock)
// and check dist/ again once they hold it, so one compiles while the others wait and then find
// nothing to do, and no process loads a dist/ another is halfway through writing.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import lockfile from "proper-lockfile";

const root = join(fileURLToPath(import.meta.url), "..", "..");
const STAMP = join(root, "dist", ".build-stamp");
const SOURCES = ["rpc", "facade", "storage", "bridge", "mocks", "scripts"];
const CONFIGS = ["package.json", "tsconfig.json", "tsconfig.build.json"];

function newest(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return path.endsWith(".ts") || path.endsWith(".json") ? stat.mtimeMs : 0;
  let max = 0;
  for (const entry of readdirSync(path)) max = Math.max(max, newest(join(path, entry)));
  return max;
}

const force = process.argv.includes("--force");
const release = await lockfile.lock(root, {
  lockfilePath: join(root, ".build.lock"),
  // The holder refreshes the lock while it compiles (tsc runs as a child, so this loop is free);
  // a lock left by a killed build goes stale after 20 s. Waiters poll for up to 5 minutes.
  stale: 20_000,
  retries: { retries: 1_500, factor: 1, minTimeout: 200, maxTimeout: 200 },
  onCompromised: (error) => {
    process.stderr.write(`build: the lock on ${root} was lost (${error.message})\n`);
    process.exit(1);
  },
});
let code = 1;
try {
  code = await buildIfStale();
} finally {
  await release();
}
process.exitCode = code;

/** Compiles and bundles what is stale; returns the process's exit code. */
async function buildIfStale() {
  const built = existsSync(STAMP) ? statSync(STAMP).mtimeMs : 0;
  const sources = Math.max(...SOURCES.map((dir) => newest(join(root, dir))), ...CONFIGS.map((file) => newest(join(root, file))));
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  const stale = built < sources || force;
  if (stale && !existsSync(tsc)) {
    // An image installed without dev dependencies: run what was built, or say what is missing.
    if (existsSync(join(root, "dist", "scripts", "start.js")) && !force) {
      process.stderr.write("dist/ looks older than the sources, but TypeScript is not installed: running dist/ as built\n");
      return 0;
    }
    process.stderr.write("Cannot compile: TypeScript is not installed (npm install, with dev dependencies, then npm run build)\n");
    return 1;
  }
  if (stale) {
    // tsc prints nothing until it is done (a minute or two on a busy machine), so say what is
    // happening, keep a ticking line while it runs, and say how long it took.
    const started = Date.now();
    const reason = force ? "npm run build" : built === 0 ? "first start: dist/ is missing" : "sources changed since the last build";
    process.stderr.write(`build: compiling the TypeScript sources to dist/ (${reason})…\n`);
    const ticker = setInterval(() => {
      process.stderr.write(`build: still compiling, ${seconds(started)} s so far\n`);
    }, 10_000);
    const child = spawn(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { stdio: "inherit" });
    const status = await new Promise((resolve) => child.on("close", (code) => resolve(code ?? 1)));
    clearInterval(ticker);
    if (status !== 0) {
      process.stderr.write(`build: compiling failed after ${seconds(started)} s (exit code ${status})\n`);
      return status;
    }
    writeFileSync(STAMP, `${new Date().toISOString()}\n`);
    process.stderr.write(`build: compiled to dist/ in ${seconds(started)} s\n`);
  }

  // The console page's bundle (dist/console), by esbuild, when its sources changed.
  const { buildConsole } = await import("./build-console.mjs");
  try {
    const started = Date.now();
    if (await buildConsole({ force })) process.stderr.write(`build: bundled the console page to dist/console/ in ${seconds(started)} s\n`);
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    return 1;
  }
  return 0;
}

/** Seconds since `started`, one decimal. */
function seconds(started) {
  return ((Date.now() - started) / 1000).toFixed(1);
}
