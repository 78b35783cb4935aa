/**
 * Console page benchmark (docs/console.md "Figures"): how fast /console loads in Chromium
 * and how many bytes it needs. The server runs in its own process (bench/internal/server.ts,
 * memory storage), the page is the bundle `npm run build` makes (built here when stale).
 *
 * Per run, a fresh browser context (empty cache) signs in through the API (not timed), then
 * opens /console and reports:
 *   load        navigation start → the load event (HTML, script and stylesheet fetched and run)
 *   key list    navigation start → the signed-in key list rendered (session, workspaces and
 *               keys fetched from the API and drawn)
 * then once more in the same context (warm: the bundle revalidated with 304).
 * Asset bytes: the page, app.js and app.css as served, raw and gzipped (zlib level 6; the
 * service sends the bundle gzipped at level 9 to browsers, so the wire is at most the gzipped figure).
 *
 *   npm run bench:console     (BENCH_CONSOLE_RUNS overrides the run count, default 10)
 */
import { gzipSync } from "node:zlib";
import { chromium, type BrowserContext } from "playwright-core";
import { buildConsole } from "../scripts/build-console.mjs";
import { forkReady } from "./internal/fork-ready.js";
import { CHROMIUM, CHROMIUM_ARGS } from "../test/helpers/browser.js";
import { availableParallelism, loadavg } from "node:os";

const RUNS = Number(process.env.BENCH_CONSOLE_RUNS ?? 10);
const KEYS = 5;

async function json(origin: string, path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) {
  const res = await fetch(origin + path, {
    method: init.method ?? "GET",
    headers: { "content-type": "application/json", ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const fmt = (values: number[]) => `median ${percentile(values, 50).toFixed(0)} ms, max ${Math.max(...values).toFixed(0)} ms`;

/** What the page functions below touch (this project's TypeScript has no DOM library). */
interface PageGlobals {
  document: { querySelector(selector: string): unknown };
}

/** One visit: navigation → load event, and → the key table drawn, from the page's own clock. */
async function visit(context: BrowserContext, origin: string): Promise<{ load: number; keys: number }> {
  const page = await context.newPage();
  // The page itself notes when the first key row appears: polling from here would add the
  // driver's round trips to the figure.
  await page.addInitScript(`new MutationObserver((_, observer) => {
    if (document.querySelector("#key-table tbody tr")) { globalThis.__keysDrawn = performance.now(); observer.disconnect(); }
  }).observe(document, { childList: true, subtree: true });`);
  await page.goto(`${origin}/console`, { waitUntil: "load" });
  await page.waitForFunction(() => (globalThis as unknown as PageGlobals).document.querySelector("#key-table tbody tr"), undefined, {
    timeout: 10_000,
  });
  const keys = (await page.evaluate("globalThis.__keysDrawn")) as number;
  const load = (await page.evaluate(`performance.getEntriesByType("navigation")[0].loadEventStart`)) as number;
  await page.close();
  return { load, keys };
}

await buildConsole();
const { child, words } = await forkReady("bench/internal/server.ts", {
  STORAGE: "memory",
  LOG_LEVEL: "silent",
  GATEWAY_JWT_SECRET: "bench-secret-that-is-at-least-32-characters",
});
const origin = words[0]!;
const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
try {
  const email = `bench${Date.now()}@example.com`;
  const password = "Correct-Horse-9";
  const registered = await json(origin, "/gateway/v1/auth/register", { method: "POST", body: { email, password, fullName: "Bench" } });
  if (registered.status !== 201) throw new Error(`register: ${registered.status}`);
  const signIn = await json(origin, "/api/session", { method: "POST", body: { email, password } });
  const cookie = signIn.headers.getSetCookie()[0]!.split(";")[0]!;
  for (let i = 0; i < KEYS; i++) await json(origin, "/api/api-keys", { method: "POST", headers: { cookie }, body: { name: `key ${i}` } });

  const bytes: { name: string; raw: number; gzip: number }[] = [];
  const measure = async (path: string) => {
    const body = Buffer.from(await (await fetch(origin + path)).arrayBuffer());
    bytes.push({ name: path, raw: body.byteLength, gzip: gzipSync(body, { level: 6 }).byteLength });
    return body.toString("utf8");
  };
  await measure("/console");
  const entry = await measure("/console/assets/app.js");
  await measure("/console/assets/app.css");
  // The chunks the page imports later (uPlot, with the usage tab).
  for (const [, chunk] of entry.matchAll(/import\("\.\/(chunk-[A-Za-z0-9]+\.js)"\)/g)) await measure(`/console/assets/${chunk}`);

  const cold: { load: number; keys: number }[] = [];
  const warm: { load: number; keys: number }[] = [];
  for (let run = 0; run < RUNS; run++) {
    const context = await browser.newContext();
    const [name, value] = cookie.split("=");
    await context.addCookies([{ name: name!, value: value!, url: `${origin}/api`, httpOnly: true, sameSite: "Lax" }]);
    cold.push(await visit(context, origin));
    warm.push(await visit(context, origin));
    await context.close();
  }

  const total = bytes.reduce((sum, entry) => ({ raw: sum.raw + entry.raw, gzip: sum.gzip + entry.gzip }), { raw: 0, gzip: 0 });
  process.stdout.write(
    `Console page (${RUNS} runs, ${KEYS} keys listed; ${availableParallelism()} cores, load ${loadavg()[0]!.toFixed(2)})\n`,
  );
  process.stdout.write(`  cold cache  load event: ${fmt(cold.map((r) => r.load))}; key list drawn: ${fmt(cold.map((r) => r.keys))}\n`);
  process.stdout.write(`  warm cache  load event: ${fmt(warm.map((r) => r.load))}; key list drawn: ${fmt(warm.map((r) => r.keys))}\n`);
  for (const entry of bytes)
    process.stdout.write(
      `  ${entry.name.padEnd(34)} ${(entry.raw / 1024).toFixed(1).padStart(6)} KiB raw, ${(entry.gzip / 1024).toFixed(1).padStart(5)} KiB gzipped\n`,
    );
  process.stdout.write(
    `  ${"total (first screen + usage tab)".padEnd(34)} ${(total.raw / 1024).toFixed(1).padStart(6)} KiB raw, ${(total.gzip / 1024).toFixed(1).padStart(5)} KiB gzipped (budget 200 KiB gzipped)\n`,
  );
} finally {
  await browser.close();
  child.kill("SIGTERM");
}
