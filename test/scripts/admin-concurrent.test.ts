import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { MICRO, openaiClient, platformAccount, userMessage } from "../helpers/chat.js";
import { countPromptTokens } from "../../rpc/chat/tokens.js";

/**
 * One writer discipline on fs across processes (docs/console-and-admin.md "Admin and server
 * on one DATA_DIR"): grants made by `npm run admin` in child processes while the server
 * charges hundreds of requests on the same balance all count, to the micro-credit.
 */

const PRICE = { input: 1000, output: 2000 };
const MODELS = { models: { echo: { provider: "echo", price: PRICE } } };
const messages = userMessage("x");
const perRequest = Math.ceil((countPromptTokens(messages) * PRICE.input + 1 * PRICE.output) / 1000);

let dataDir: string;
let server: TestServer;

function grant(workspace: string, credits: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      join("node_modules", ".bin", "tsx"),
      ["scripts/admin.ts", "grant-credits", "--workspace", workspace, "--credits", credits],
      { env: { ...process.env, STORAGE: "fs", DATA_DIR: dataDir, LOG_LEVEL: "silent" }, timeout: 60_000 },
      (error, _stdout, stderr) => resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stderr }),
    );
  });
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "gw-admin-race-"));
  server = await startTestServer({ STORAGE: "fs", DATA_DIR: dataDir, MODELS_JSON: JSON.stringify(MODELS) });
});
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
  await rm(dataDir, { recursive: true, force: true });
});

describe("npm run admin beside a running server on one DATA_DIR", () => {
  it("grants made while hundreds of charges run sum exactly", async () => {
    const account = await platformAccount(server, 1);
    const client = openaiClient(server, "/api/v1", account.key);
    const requests = 300;
    let served = 0;
    let next = 0;
    const charging = Promise.all(
      Array.from({ length: 12 }, async () => {
        while (next < requests) {
          next += 1;
          await client.chat.completions.create({ model: "echo", messages, max_tokens: 1 });
          served += 1;
        }
      }),
    );
    const grants = ["0.25", "0.5", "0.125", "1", "0.000001", "2"];
    const results = await Promise.all(grants.map((credits) => grant(account.workspaceId, credits)));
    await charging;
    for (const result of results) expect(result.code, result.stderr).toBe(0);
    expect(served).toBe(requests);
    const granted = grants.reduce((sum, credits) => sum + Math.round(Number(credits) * MICRO), 0);
    const { ledger } = server.composition.ports.repos;
    expect(await ledger.state(ledger.credits(account.workspaceId))).toMatchObject({
      value: MICRO + granted - requests * perRequest,
      held: 0,
    });
  }, 120_000);
});
