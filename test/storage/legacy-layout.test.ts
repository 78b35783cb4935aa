import { cp, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startTestServer } from "../helpers/server.js";
import { openaiClient, userMessage } from "../helpers/chat.js";

/**
 * Migration (docs/storage.md): a DATA_DIR in the older one-file-per-record layout
 * (test/fixtures/legacy-data-dir, written by that version) is imported into the journal
 * engine on the first start — its user logs in, its key is served and debited — and the old
 * files are set aside under .legacy-layout, not read again.
 */

const FIXTURE = "test/fixtures/legacy-data-dir";
const WORKSPACE = "ws_NlxWVeYTMxqMExos";
const KEY = "sk-gateway-negZWZGl9B9mZ4ISwkgZPjP01WcXakba0WjHlMXE2uKiVo";
const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("a DATA_DIR in the one-file-per-record layout", () => {
  it("is imported on the first start and served from the journal after", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-legacy-"));
    dirs.push(dir);
    await cp(FIXTURE, dir, { recursive: true, filter: (source) => !source.endsWith("README.md") });
    let server = await startTestServer({ STORAGE: "fs", DATA_DIR: dir });
    let balance: number;
    try {
      const login = await fetch(server.url("/gateway/v1/auth/login"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "legacy@example.com", password: "Legacy-Horse-9" }),
      });
      expect(login.status).toBe(200);
      expect(await server.composition.ports.repos.credits.balance(WORKSPACE)).toBe(3_000_000);
      // Listings read indexes, built once from the imported records (docs/storage.md "Indexes").
      expect((await server.composition.ports.repos.keys.list(WORKSPACE, "platform")).map((key) => key.id)).toEqual([
        "key_QxeNlG6xxImwwAhV",
      ]);
      expect((await server.composition.ports.repos.tenants.workspacesOf("ten_A8yUubc5J571xUTP")).map((ws) => ws.id)).toEqual([WORKSPACE]);
      const client = openaiClient(server, "/api/v1", KEY);
      const model = (await client.models.list()).data[0]!.id;
      await client.chat.completions.create({ model, messages: userMessage("after the import") });
      balance = await server.composition.ports.repos.credits.balance(WORKSPACE);
      expect(balance).toBeLessThan(3_000_000);
      expect(balance).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
    const top = await readdir(dir);
    expect(top.filter((name) => !name.startsWith("."))).toEqual([]);
    expect((await readdir(join(dir, ".legacy-layout"))).sort()).toEqual([
      "atomic",
      "keyhash",
      "keys",
      "model-registry",
      "tenant-workspaces",
      "tenants",
      "users",
      "workspaces",
    ]);

    // The second start reads the snapshot: the charge made after the import is there.
    server = await startTestServer({ STORAGE: "fs", DATA_DIR: dir });
    try {
      expect(await server.composition.ports.repos.credits.balance(WORKSPACE)).toBe(balance);
      const client = openaiClient(server, "/api/v1", KEY);
      expect((await client.models.list()).data.length).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  }, 60_000);
});
