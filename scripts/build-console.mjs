// Bundles the console page (facade/console/page, Preact + uPlot in TSX) with esbuild into
// dist/console/{app.js, app.css, chunk-*.js}, which facade/console/route.ts serves at /console. Run by
// scripts/build-if-stale.mjs (npm start, npm run build) and by the test suite's global setup;
// `node scripts/build-console.mjs` builds it alone. Skips the work when the bundle is newer
// than every source file (a few ms).
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(fileURLToPath(import.meta.url), "..", "..");
export const CONSOLE_SOURCE = join(root, "facade", "console", "page");
export const CONSOLE_OUT = join(root, "dist", "console");

function newest(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let max = 0;
  for (const entry of readdirSync(path)) max = Math.max(max, newest(join(path, entry)));
  return max;
}

/** Builds the bundle when missing, older than its sources or `force`; returns whether it built. */
export async function buildConsole({ force = false } = {}) {
  const bundle = join(CONSOLE_OUT, "app.js");
  const built = existsSync(bundle) && existsSync(join(CONSOLE_OUT, "app.css")) ? statSync(bundle).mtimeMs : 0;
  const sources = Math.max(newest(CONSOLE_SOURCE), newest(join(root, "package.json")));
  if (!force && built >= sources) return false;
  let esbuild;
  try {
    esbuild = await import("esbuild");
  } catch {
    throw new Error("Cannot build the console page: esbuild is not installed (npm install, with dev dependencies)");
  }
  rmSync(CONSOLE_OUT, { recursive: true, force: true });
  mkdirSync(CONSOLE_OUT, { recursive: true });
  await esbuild.build({
    entryPoints: { app: join(CONSOLE_SOURCE, "main.tsx") },
    bundle: true,
    minify: true,
    format: "esm",
    // uPlot is a chunk of its own, loaded when the usage tab opens.
    splitting: true,
    chunkNames: "chunk-[hash]",
    target: ["es2022"],
    jsx: "automatic",
    jsxImportSource: "preact",
    outdir: CONSOLE_OUT,
    legalComments: "linked",
    logLevel: "warning",
    absWorkingDir: root,
  });
  return true;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await buildConsole({ force: process.argv.includes("--force") });
}
