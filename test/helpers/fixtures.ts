import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CapturedDialect, CapturedRequest } from "./capture-server.js";

/**
 * The golden fixtures of real clients (docs/clients.md "Golden fixtures"): what each client sent
 * for one scenario, recorded by `npm run clients:record` (scripts/record-client-fixtures.ts) into
 * test/fixtures/clients/<client>-<scenario>.json. A new client shape is one new file: every
 * reader of the fixtures goes through `clientFixtures()`, which lists the folder.
 */
export const FIXTURES_DIR = fileURLToPath(new URL("../fixtures/clients/", import.meta.url));

export interface ClientFixture {
  /** `openai`, `anthropic-sdk`, `ai-sdk`, `langchain`, `openai-agents`, `claude-code`, `codex`. */
  client: string;
  /** The client's own version (its main npm package's). */
  version: string;
  /** The SDK scenarios' npm packages with their versions (`@langchain/openai`, `@langchain/core`…). */
  packages?: Record<string, string>;
  scenario: string;
  /** What the scenario does, in a sentence. */
  description: string;
  /** Every request of the scenario, in the order the client sent them. */
  requests: Omit<CapturedRequest, "scenario">[];
}

/** The file name of a fixture: `<client>-<scenario>.json`. */
export const fixtureFile = (client: string, scenario: string) => `${client}-${scenario}.json`;

export function clientFixtures(filter: { client?: string; dialect?: CapturedDialect } = {}): ClientFixture[] {
  return readdirSync(FIXTURES_DIR)
    .filter((file) => file.endsWith(".json"))
    .sort()
    .map((file) => JSON.parse(readFileSync(join(FIXTURES_DIR, file), "utf8")) as ClientFixture)
    .filter((fixture) => !filter.client || fixture.client === filter.client)
    .filter((fixture) => !filter.dialect || fixture.requests.some((request) => request.dialect === filter.dialect));
}

export function clientFixture(client: string, scenario: string): ClientFixture {
  return JSON.parse(readFileSync(join(FIXTURES_DIR, fixtureFile(client, scenario)), "utf8")) as ClientFixture;
}
