// Runs before `npm start`, `npm run admin` and `npm run vm-agent` (npm's pre-scripts): compiles
// the TypeScript sources to dist/ when dist/ is missing or older than any source, so a fresh
// clone needs only `npm install && npm start` while the process that serves runs compiled
// JavaScript (no transpiler at start, one process that receives the signals). A deployment
// runs `npm run build` once in its image; this check then finds nothing to do (a few ms).
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

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

const built = existsSync(STAMP) ? statSync(STAMP).mtimeMs : 0;
const sources = Math.max(...SOURCES.map((dir) => newest(join(root, dir))), ...CONFIGS.map((file) => newest(join(root, file))));
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
if ((built < sources || process.argv.includes("--force")) && !existsSync(tsc)) {
  // An image installed without dev dependencies: run what was built, or say what is missing.
  if (existsSync(join(root, "dist", "scripts", "start.js")) && !process.argv.includes("--force")) {
    process.stderr.write("dist/ looks older than the sources, but TypeScript is not installed: running dist/ as built\n");
    process.exit(0);
  }
  process.stderr.write("Cannot compile: TypeScript is not installed (npm install, with dev dependencies, then npm run build)\n");
  process.exit(1);
}
if (built < sources || process.argv.includes("--force")) {
  process.stderr.write("Compiling to dist/ (npm run build)…\n");
  const result = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { stdio: "inherit" });
  if (result.status !== 0) process.exit(result.status ?? 1);
  const { writeFileSync } = await import("node:fs");
  writeFileSync(STAMP, `${new Date().toISOString()}\n`);
}

// The console page's bundle (dist/console), by esbuild, when its sources changed.
const { buildConsole } = await import("./build-console.mjs");
try {
  if (await buildConsole({ force: process.argv.includes("--force") })) process.stderr.write("Bundled the console page to dist/console/\n");
} catch (error) {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
