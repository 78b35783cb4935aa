import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

/** Debian's Chromium; the browser tests fail (never skip) without it. `.ci/run` installs it. */
export const CHROMIUM = "/usr/bin/chromium";

/** Flags for a headless Chromium on a closed network (../shared/STACK.md). */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
];

export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** A Chromium with a fresh profile (a new user-data dir, removed on close). */
export async function launchBrowser(viewport = { width: 1280, height: 860 }): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: the browser tests need Debian's chromium (apt-get install -y chromium)`);
  const profile = await mkdtemp(join(tmpdir(), "console-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    headless: true,
    viewport,
  });
  return {
    context,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
