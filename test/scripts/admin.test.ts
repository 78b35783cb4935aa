import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type OpenAI from "openai";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openaiClient, userMessage } from "../helpers/chat.js";

/**
 * `npm run admin -- …` (docs/console-and-admin.md) run as a child process against an fs
 * DATA_DIR, then the key it printed used on the Platform API of a server on the same DATA_DIR.
 */

let dataDir: string;
let server: TestServer | undefined;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json(): any;
}

function admin(...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      "npm",
      ["run", "--silent", "admin", "--", ...args],
      { env: { ...process.env, STORAGE: "fs", DATA_DIR: dataDir, LOG_LEVEL: "silent" }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr, json: () => JSON.parse(stdout) });
      },
    );
  });
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "gw-admin-"));
});
afterAll(async () => {
  if (server) {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  }
  await rm(dataDir, { recursive: true, force: true });
});

describe("npm run admin", () => {
  let workspace: string;
  let key: string;

  it("creates a user, grants credits and creates the workspace's first key", async () => {
    const created = await admin("create-user", "--email", "owner@example.com", "--name", "Owner", "--password", "Correct-Horse-9");
    expect(created.code, created.stderr).toBe(0);
    const user = created.json().user;
    expect(user).toMatchObject({ email: "owner@example.com", workspaceId: expect.any(String) });
    expect(created.stdout).not.toContain("Correct-Horse-9");
    workspace = user.workspaceId;

    const granted = await admin("grant-credits", "--workspace", workspace, "--credits", "2.5");
    expect(granted.code, granted.stderr).toBe(0);
    expect(granted.json()).toEqual({ workspace, granted: 2.5, balance: 2.5 });

    const made = await admin("create-key", "--workspace", workspace, "--name", "first key", "--rpm", "100");
    expect(made.code, made.stderr).toBe(0);
    const result = made.json();
    expect(result).toMatchObject({ workspace, name: "first key", scopes: ["chat:write"], rpmLimit: 100 });
    key = result.key;
    expect(key).toMatch(/^sk-gateway-/);
  }, 120_000);

  it("prints the key once: it works on the Platform API of a server on the same DATA_DIR, and is debited", async () => {
    server = await startTestServer({ STORAGE: "fs", DATA_DIR: dataDir });
    const client = openaiClient(server, "/api/v1", key);
    const models = await client.models.list();
    expect(models.data.length).toBeGreaterThan(0);
    const completion = await client.chat.completions.create({ model: models.data[0]!.id, messages: userMessage("paid by admin credits") });
    expect(completion.choices[0]!.message.content).toBe("paid by admin credits");
    const balance = await server.composition.ports.repos.credits.balance(workspace);
    expect(balance).toBeLessThan(2_500_000);
    expect(balance).toBeGreaterThan(0);
    // The store holds the key's hash only.
    const record = (await server.composition.ports.repos.keys.list(workspace, "platform"))[0]!;
    expect(record.hash).not.toContain(key);
    expect(JSON.stringify(record)).not.toContain(key);

    const shown = await admin("balance", "--workspace", workspace);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.json().microCredits).toBe(balance);
  }, 120_000);

  it("grants reach a running server: a workspace out of credits is served again after a grant", async () => {
    const created = await admin("create-user", "--email", "second@example.com");
    expect(created.code, created.stderr).toBe(0);
    expect(created.json().password).toEqual(expect.any(String)); // generated, printed once
    const second = created.json().user.workspaceId;
    const secondKey = (await admin("create-key", "--workspace", second, "--name", "k")).json().key;
    const client = openaiClient(server!, "/api/v1", secondKey);
    const refused = await client.models.list().catch((e: unknown) => e);
    expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
    expect((await admin("grant-credits", "--workspace", second, "--credits", "1")).code).toBe(0);
    await client.chat.completions.create({ model: (await client.models.list()).data[0]!.id, messages: userMessage("now paid") });
  }, 120_000);

  it("refuses bad usage with exit code 2 and an unknown workspace with 1", async () => {
    const unknown = await admin("frobnicate");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/Unknown command/);
    const missing = await admin("grant-credits", "--credits", "1");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--workspace is required/);
    const badAmount = await admin("grant-credits", "--workspace", workspace, "--credits", "-3");
    expect(badAmount.code).toBe(2);
    const nowhere = await admin("grant-credits", "--workspace", "ws_doesnotexist", "--credits", "1");
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr).toMatch(/No workspace/);
  }, 120_000);
});
