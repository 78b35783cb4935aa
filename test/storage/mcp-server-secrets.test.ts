import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer } from "../helpers/server.js";
import { serveScripted } from "../helpers/upstream.js";
import { TEST_REDIS_URL, dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { rawFiles, rawRedis } from "../helpers/raw-storage.js";
import { eventually } from "../helpers/eventually.js";
import { openStore } from "../../storage/store.js";
import { SecretBox } from "../../storage/secret-box.js";

/**
 * Issue 9 item 1: an upstream's header values are encrypted at rest (AES-256-GCM, key from
 * DATA_ENCRYPTION_SECRET, generated into DATA_DIR on fs), never returned, and still usable
 * after a restart; records stored in plaintext before this load and are sealed.
 */

const SECRET = "Bearer upstream-credential-4f1d9c";

describe("SecretBox", () => {
  it("seals with a fresh IV, opens only with the same secret, and refuses an altered value", () => {
    const box = new SecretBox("a-data-encryption-secret-of-32-characters!");
    const one = box.seal("value");
    expect(one).toMatch(/^enc:v1:/);
    expect(box.seal("value")).not.toBe(one);
    expect(box.open(one)).toBe("value");
    expect(() => new SecretBox("another-data-encryption-secret-of-32-chars").open(one)).toThrow();
    // Flip one bit of the sealed bytes (not a base64 character, whose low bits may be padding).
    const bytes = Buffer.from(one.slice("enc:v1:".length), "base64url");
    bytes[bytes.length - 1]! ^= 1;
    const tampered = `enc:v1:${bytes.toString("base64url")}`;
    expect(() => box.open(tampered)).toThrow();
    expect(box.openOrPlain("plain")).toBe("plain");
  });
});

describe.each(["fs", "redis"] as const)("upstream headers at rest (%s)", (storage) => {
  const prefix = uniqueRedisPrefix();
  let dir: string;
  let upstream: Awaited<ReturnType<typeof serveScripted>>;
  // fs: no DATA_ENCRYPTION_SECRET, so the server generates DATA_DIR/.data-encryption-secret.
  const env = (): Record<string, string> =>
    storage === "fs"
      ? { STORAGE: "fs", DATA_DIR: dir, DATA_ENCRYPTION_SECRET: "", MCP_SERVERS_ALLOW_PRIVATE: "true" }
      : { STORAGE: "redis", REDIS_PREFIX: prefix, MCP_SERVERS_ALLOW_PRIVATE: "true" };
  const raw = () => (storage === "fs" ? rawFiles(dir) : rawRedis(prefix));

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gw-secrets-"));
    upstream = await serveScripted([
      { tool: { name: "echo", inputSchema: { type: "object" } }, run: () => ({ content: [{ type: "text", text: "ok" }] }) },
    ]);
  });
  afterAll(async () => {
    await upstream.close();
    await rm(dir, { recursive: true, force: true });
    if (storage === "redis") await dropRedisPrefix(prefix);
  });

  it("stores the values sealed, never shows them, and sends them upstream after a restart", async () => {
    const first = await startTestServer(env());
    const user = await registerUser(first);
    const created = await first.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: bearer(user.token),
      json: { name: "sealed", url: upstream.url, headers: { Authorization: SECRET, "X-Tenant": "visible-name-only" } },
    });
    expect(created.status).toBe(201);
    expect(JSON.stringify(created.body)).not.toContain("upstream-credential");
    const stored = await raw();
    expect(stored).toContain("sealed");
    expect(stored).toContain("enc:v1:");
    expect(stored).not.toContain("upstream-credential");
    expect(stored).not.toContain("visible-name-only");
    expect(first.rawLogs.join("\n")).not.toContain("upstream-credential");
    if (storage === "fs") expect((await readFile(join(dir, ".data-encryption-secret"), "utf8")).trim().length).toBeGreaterThanOrEqual(32);
    await first.close();

    const sessionsBefore = upstream.requestHeaders.length;
    const second = await startTestServer(env());
    try {
      const headers = bearer(user.token);
      await eventually(async () => (await second.request("/gateway/v1/mcp/servers", { headers })).body.servers[0]?.health === "healthy");
      const call = await second.request("/gateway/v1/mcp/tools/execute?tool=sealed__echo", { method: "POST", headers, json: { args: {} } });
      expect(call.body.content).toEqual([{ type: "text", text: "ok" }]);
      const seen = upstream.requestHeaders.slice(sessionsBefore);
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((h) => h.authorization === SECRET && h["x-tenant"] === "visible-name-only")).toBe(true);
      expect(JSON.stringify((await second.request("/gateway/v1/mcp/servers", { headers })).body)).not.toContain("upstream-credential");
      expect(second.loggedErrors()).toEqual([]);
    } finally {
      await second.close();
    }
  });

  it("loads a record stored in plaintext before owners and encryption, gives it to its creator's tenant and seals it", async () => {
    const seed = await startTestServer(env());
    const owner = await registerUser(seed);
    const other = await registerUser(seed);
    await seed.close();
    // The record as the previous version wrote it: `mcp-servers:<name>`, plaintext headers, no owner.
    const store = await openStore({ STORAGE: storage, DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix });
    await store.kv.setItem("mcp-servers:legacy", {
      name: "legacy",
      url: upstream.url,
      headers: { Authorization: "Bearer legacy-plaintext-77" },
      category: "mcp",
      createdBy: owner.user.id,
      createdAt: new Date().toISOString(),
    } as never);
    await store.atomic.setIfAbsent("mcp-server-name:legacy", "x");
    // The previous version kept no indexes: the next start builds them from the records (docs/storage.md "Indexes").
    await store.kv.removeItem("layout:indexes");
    if (storage === "redis") await store.duplicateRedis!().del(`${prefix}:layout`);
    await store.close();
    expect(await raw()).toContain("legacy-plaintext-77");

    const server = await startTestServer(env());
    try {
      await eventually(
        async () => (await server.request("/gateway/v1/mcp/tools/legacy__echo", { headers: bearer(owner.token) })).status === 200,
      );
      expect((await server.request("/gateway/v1/mcp/tools/legacy__echo", { headers: bearer(other.token) })).status).toBe(404);
      expect((await server.request("/gateway/v1/mcp/servers", { headers: bearer(other.token) })).body.count).toBe(0);
      expect(upstream.requestHeaders.some((h) => h.authorization === "Bearer legacy-plaintext-77")).toBe(true);
      // fs: what the server holds now; the value it replaced leaves the disk with the journal
      // at the next snapshot (at the latest when the server closes), checked below.
      const current = async () =>
        storage === "fs"
          ? JSON.stringify(
              await Promise.all(
                (await server.composition.ports.store.kv.getKeys("")).map((key) => server.composition.ports.store.kv.getItem(key)),
              ),
            )
          : raw();
      await eventually(async () => !(await current()).includes("legacy-plaintext-77"));
      expect(server.loggedErrors()).toEqual([]);
    } finally {
      await server.close();
    }
    expect(await raw()).not.toContain("legacy-plaintext-77");
  });
});
