import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { authenticate } from "../../../rpc/auth.js";
import { sha256Hex } from "../../../storage/ids.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { consoleCookieFrom, consoleSignIn, withCookie, type ConsoleCookie } from "../../helpers/console.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";

const KEYS = "/api/api-keys";
const LIST_FIELDS = ["createdAt", "expiresAt", "id", "lastUsedAt", "name", "rpmLimit", "scopes", "spendLimit", "tpmLimit"];

/** What the auth layer says of a platform key, without depending on any Platform route. */
async function platformKeyState(server: TestServer, key: string): Promise<"ok" | string> {
  try {
    await authenticate({ bearer: key }, { kinds: ["platform_key"] }, server.dispatcher.ports);
    return "ok";
  } catch (error) {
    return (error as Error).message;
  }
}

async function allFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await allFiles(path)));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

describe("Console session and key endpoints (docs/interface.md 4.3, 7.3)", () => {
  let server: TestServer;
  let alice: Awaited<ReturnType<typeof registerUser>>;
  let bob: Awaited<ReturnType<typeof registerUser>>;
  let aliceCookie: ConsoleCookie;
  let bobCookie: ConsoleCookie;

  beforeAll(async () => {
    server = await startTestServer();
    [alice, bob] = await Promise.all([registerUser(server), registerUser(server)]);
    [aliceCookie, bobCookie] = await Promise.all([
      consoleSignIn(server, alice.email, alice.password),
      consoleSignIn(server, bob.email, bob.password),
    ]);
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  describe("sign-in and sign-out", () => {
    it("sets an HttpOnly, SameSite=Lax session cookie scoped to /api and not Secure over http", async () => {
      const res = await server.request("/api/session", { method: "POST", json: { email: alice.email, password: alice.password } });
      expect(res.status).toBe(200);
      expect(res.body.user).toMatchObject({ id: alice.user.id, email: alice.email, workspaceId: alice.user.workspaceId });
      expect(res.body.user).not.toHaveProperty("passwordHash");
      expect(JSON.stringify(res.body)).not.toMatch(/eyJ/); // the token is in the cookie only
      const cookie = consoleCookieFrom(res.headers)!;
      expect(cookie.raw).toMatch(/; HttpOnly/);
      expect(cookie.raw).toMatch(/; SameSite=Lax/);
      expect(cookie.raw).toMatch(/; Path=\/api(;|$)/);
      expect(cookie.raw).toMatch(/; Max-Age=\d+/);
      expect(cookie.raw).not.toMatch(/Secure/);
    });

    it("returns the signed-in user from GET /api/session", async () => {
      const res = await server.request("/api/session", { headers: withCookie(aliceCookie) });
      expect(res.status).toBe(200);
      expect(res.body.user.id).toBe(alice.user.id);
      expect(Date.parse(res.body.expiresAt)).toBeGreaterThan(Date.now());
    });

    it("refuses a wrong password with 401 {error: {message}} and sets no cookie", async () => {
      const res = await server.request("/api/session", { method: "POST", json: { email: alice.email, password: "Wrong-password-1" } });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: { message: "Invalid email or password" } });
      expect(consoleCookieFrom(res.headers)).toBeUndefined();
    });

    it("sign-out revokes the session and clears the cookie", async () => {
      const cookie = await consoleSignIn(server, bob.email, bob.password);
      const out = await server.request("/api/session", { method: "DELETE", headers: withCookie(cookie) });
      expect(out.status).toBe(200);
      const cleared = consoleCookieFrom(out.headers)!;
      expect(cleared.pair).toBe("gw_console=");
      expect(cleared.raw).toMatch(/Max-Age=0/);
      // The old cookie value no longer works, even if a browser kept it.
      const again = await server.request(KEYS, { headers: withCookie(cookie) });
      expect(again.status).toBe(401);
      expect(again.body).toEqual({ error: { message: "Session expired or signed out; sign in again" } });
      // Other sessions of the same user are untouched.
      expect((await server.request(KEYS, { headers: withCookie(bobCookie) })).status).toBe(200);
    });
  });

  describe("key lifecycle", () => {
    it("creates, lists, updates and revokes a platform key", async () => {
      const created = await server.request(KEYS, { method: "POST", headers: withCookie(aliceCookie), json: { name: "  ci  " } });
      expect(created.status).toBe(201);
      expect(Object.keys(created.body).sort()).toEqual(["createdAt", "id", "key", "name"]);
      expect(created.body.name).toBe("ci");
      expect(created.body.key).toMatch(/^sk-gateway-[0-9A-Za-z]{46}$/);
      const { id, key } = created.body;
      expect(await platformKeyState(server, key)).toBe("ok");

      const list = await server.request(KEYS, { headers: withCookie(aliceCookie) });
      expect(list.status).toBe(200);
      const entry = list.body.data.find((item: { id: string }) => item.id === id);
      expect(Object.keys(entry).sort()).toEqual(LIST_FIELDS);
      expect(entry).toMatchObject({
        name: "ci",
        scopes: ["chat:write"],
        expiresAt: null,
        spendLimit: null,
        rpmLimit: null,
        tpmLimit: null,
      });
      expect(JSON.stringify(list.body)).not.toContain(key);
      expect(JSON.stringify(list.body)).not.toContain(key.slice(11, 30));

      const patched = await server.request(`${KEYS}/${id}`, {
        method: "PATCH",
        headers: withCookie(aliceCookie),
        json: { name: "ci-prod", spendLimit: 12.5, rpmLimit: 60, tpmLimit: 100000 },
      });
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ id, name: "ci-prod", spendLimit: 12.5, rpmLimit: 60, tpmLimit: 100000 });
      expect(JSON.stringify(patched.body)).not.toContain(key);
      const cleared = await server.request(`${KEYS}/${id}`, {
        method: "PATCH",
        headers: withCookie(aliceCookie),
        json: { rpmLimit: null },
      });
      expect(cleared.body).toMatchObject({ name: "ci-prod", rpmLimit: null, spendLimit: 12.5 });
      // The limits are on the stored record the Platform API enforces.
      const stored = await server.composition.ports.repos.keys.get(alice.user.workspaceId, id);
      expect(stored).toMatchObject({ spendLimit: 12.5, rpmLimit: null, tpmLimit: 100000 });

      const deleted = await server.request(`${KEYS}/${id}`, { method: "DELETE", headers: withCookie(aliceCookie) });
      expect(deleted.status).toBe(200);
      expect(deleted.body).toEqual({ id, revoked: true });
      const after = await server.request(KEYS, { headers: withCookie(aliceCookie) });
      expect(after.body.data.map((item: { id: string }) => item.id)).not.toContain(id);
      // Permanent: a second delete or a PATCH finds nothing.
      expect((await server.request(`${KEYS}/${id}`, { method: "DELETE", headers: withCookie(aliceCookie) })).status).toBe(404);
      expect(
        (await server.request(`${KEYS}/${id}`, { method: "PATCH", headers: withCookie(aliceCookie), json: { name: "x" } })).status,
      ).toBe(404);
    });

    it("refuses a revoked key with 401 on the Platform API", async () => {
      const created = await server.request(KEYS, { method: "POST", headers: withCookie(aliceCookie), json: { name: "short-lived" } });
      const key = created.body.key as string;
      await server.composition.ports.repos.credits.grant(alice.user.workspaceId, 5_000_000);
      const before = await server.request("/api/v1/models", { headers: bearer(key) });
      expect(before.status).toBe(200);
      await server.request(`${KEYS}/${created.body.id}`, { method: "DELETE", headers: withCookie(aliceCookie) });
      const after = await server.request("/api/v1/models", { headers: bearer(key) });
      expect(after.status).toBe(401);
      expect(after.body.error).toMatchObject({ message: "Invalid or expired API key", type: "authentication_error" });
      expect(await platformKeyState(server, key)).toBe("Invalid or expired API key");
    });

    it("accepts an optional future expiresAt and refuses the key with 401 once it passes", async () => {
      const expiresAt = new Date(Date.now() + 60 * 60 * 1000).toISOString();
      const created = await server.request(KEYS, {
        method: "POST",
        headers: withCookie(aliceCookie),
        json: { name: "expiring", expiresAt },
      });
      expect(created.status).toBe(201);
      const list = await server.request(KEYS, { headers: withCookie(aliceCookie) });
      expect(list.body.data.find((item: { id: string }) => item.id === created.body.id).expiresAt).toBe(expiresAt);
      expect(await platformKeyState(server, created.body.key)).toBe("ok");
      vi.useFakeTimers({ toFake: ["Date"] });
      try {
        vi.setSystemTime(Date.now() + 2 * 60 * 60 * 1000);
        expect(await platformKeyState(server, created.body.key)).toBe("Invalid or expired API key");
      } finally {
        vi.useRealTimers();
      }
    });

    it.each([
      ["a past expiresAt", { name: "k", expiresAt: "2000-01-01T00:00:00Z" }, "expiresAt must be in the future"],
      ["a non-date expiresAt", { name: "k", expiresAt: "tomorrow" }, "expiresAt"],
      ["a missing name", {}, "name"],
      ["an empty name", { name: "   " }, "name is required"],
      ["a numeric name", { name: 7 }, "name must be a string"],
    ])("refuses creation with %s (400)", async (_label, body, message) => {
      const res = await server.request(KEYS, { method: "POST", headers: withCookie(aliceCookie), json: body });
      expect(res.status).toBe(400);
      expect(res.body.error.message).toContain(message);
    });
  });

  describe("PATCH validation", () => {
    let id: string;
    beforeAll(async () => {
      const created = await server.request(KEYS, { method: "POST", headers: withCookie(aliceCookie), json: { name: "limits" } });
      id = created.body.id;
    });

    it.each([
      ["a negative spendLimit", { spendLimit: -1 }, "spendLimit must not be negative"],
      ["a string rpmLimit", { rpmLimit: "60" }, "rpmLimit must be a number or null"],
      ["a fractional tpmLimit", { tpmLimit: 1.5 }, "tpmLimit must be a whole number"],
      ["a negative rpmLimit", { rpmLimit: -5 }, "rpmLimit must not be negative"],
      ["an empty name", { name: "" }, "name is required"],
      ["no updatable field", {}, "Provide at least one of name, spendLimit, rpmLimit, tpmLimit"],
      ["only unknown fields", { scopes: ["admin"] }, "Provide at least one of"],
    ])("refuses %s with 400 {error: {message}}", async (_label, body, message) => {
      const res = await server.request(`${KEYS}/${id}`, { method: "PATCH", headers: withCookie(aliceCookie), json: body });
      expect(res.status).toBe(400);
      expect(Object.keys(res.body)).toEqual(["error"]);
      expect(res.body.error.message).toContain(message);
      const stored = await server.composition.ports.repos.keys.get(alice.user.workspaceId, id);
      expect(stored).toMatchObject({ name: "limits", spendLimit: null, rpmLimit: null, tpmLimit: null, scopes: ["chat:write"] });
    });
  });

  describe("isolation and credentials", () => {
    it("answers another workspace's key with the same 404 as a missing one, on PATCH and DELETE", async () => {
      const bobs = await server.request(KEYS, { method: "POST", headers: withCookie(bobCookie), json: { name: "bob's" } });
      const missing = await server.request(`${KEYS}/key_doesnotexist`, {
        method: "PATCH",
        headers: withCookie(aliceCookie),
        json: { name: "x" },
      });
      const patch = await server.request(`${KEYS}/${bobs.body.id}`, {
        method: "PATCH",
        headers: withCookie(aliceCookie),
        json: { name: "mine now" },
      });
      const del = await server.request(`${KEYS}/${bobs.body.id}`, { method: "DELETE", headers: withCookie(aliceCookie) });
      for (const res of [missing, patch, del]) {
        expect(res.status).toBe(404);
        expect(res.body).toEqual({ error: { message: "API key not found" } });
      }
      expect(await platformKeyState(server, bobs.body.key)).toBe("ok");
      const bobList = await server.request(KEYS, { headers: withCookie(bobCookie) });
      expect(bobList.body.data.find((item: { id: string }) => item.id === bobs.body.id).name).toBe("bob's");
      const aliceList = await server.request(KEYS, { headers: withCookie(aliceCookie) });
      expect(aliceList.body.data.map((item: { id: string }) => item.id)).not.toContain(bobs.body.id);
    });

    it.each([
      ["GET", KEYS],
      ["POST", KEYS],
      ["PATCH", `${KEYS}/key_x`],
      ["DELETE", `${KEYS}/key_x`],
      ["GET", "/api/session"],
      ["DELETE", "/api/session"],
    ])("answers %s %s without a session with 401 {error: {message}}", async (method, path) => {
      const res = await server.request(path, { method, json: method === "POST" || method === "PATCH" ? { name: "x" } : undefined });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: { message: "Not signed in" } });
    });

    it("never lets an API key or a bearer session token create a key", async () => {
      const created = await server.request(KEYS, { method: "POST", headers: withCookie(aliceCookie), json: { name: "api key" } });
      const platformKey = created.body.key as string;
      const gatewayKey = (
        await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(alice.token), json: { name: "gw" } })
      ).body.key as string;
      const before = (await server.composition.ports.repos.keys.list(alice.user.workspaceId, "platform")).length;
      for (const token of [platformKey, gatewayKey, alice.token]) {
        const res = await server.request(KEYS, { method: "POST", headers: bearer(token), json: { name: "minted" } });
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ error: { message: "Not signed in" } });
        // The cookie's value in a bearer header is still not a cookie.
        const rpc = await server.request("/rpc", {
          method: "POST",
          headers: bearer(token),
          json: { jsonrpc: "2.0", id: 1, method: "console.keys.create", params: { name: "minted" } },
        });
        expect(rpc.body.error).toMatchObject({ code: -32001 });
      }
      // A cookie carrying an API key instead of a session is refused too.
      const forged = await server.request(KEYS, {
        method: "POST",
        headers: { cookie: `gw_console=${platformKey}` },
        json: { name: "minted" },
      });
      expect(forged.status).toBe(401);
      expect((await server.composition.ports.repos.keys.list(alice.user.workspaceId, "platform")).length).toBe(before);
    });

    it("keeps key secrets out of the logs", async () => {
      const created = await server.request(KEYS, { method: "POST", headers: withCookie(aliceCookie), json: { name: "logged?" } });
      await server.request(KEYS, { headers: withCookie(aliceCookie) });
      const logs = server.rawLogs.join("\n");
      expect(logs).toContain("console.keys.create");
      expect(logs).not.toContain(created.body.key);
      expect(logs).not.toContain(aliceCookie.pair.slice("gw_console=".length));
    });
  });
});

describe("Console cookie over https", () => {
  it("is Secure when PUBLIC_URL is https", async () => {
    const server = await startTestServer({ PUBLIC_URL: "https://gateway.example.com" });
    try {
      const user = await registerUser(server);
      const cookie = await consoleSignIn(server, user.email, user.password);
      expect(cookie.raw).toMatch(/; Secure/);
      expect(cookie.raw).toMatch(/; HttpOnly/);
    } finally {
      await server.close();
    }
  });
});

describe("Console keys on the fs store", () => {
  it("stores only the SHA-256 of a key, never the plaintext", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "console-keys-"));
    const server = await startTestServer({ STORAGE: "fs", DATA_DIR: dataDir });
    try {
      const user = await registerUser(server);
      const cookie = await consoleSignIn(server, user.email, user.password);
      const created = await server.request(KEYS, { method: "POST", headers: withCookie(cookie), json: { name: "on disk" } });
      expect(created.status).toBe(201);
      const contents = await Promise.all((await allFiles(dataDir)).map((file) => readFile(file, "utf8")));
      const everything = contents.join("\n");
      expect(everything).toContain(sha256Hex(created.body.key)); // we looked in the right place
      expect(everything).not.toContain(created.body.key);
      expect(everything).not.toContain(created.body.key.slice(15, 40));
    } finally {
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe("Console keys on Redis", () => {
  const prefix = uniqueRedisPrefix();
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ STORAGE: "redis", REDIS_PREFIX: prefix });
  });
  afterAll(async () => {
    await server.close();
    await dropRedisPrefix(prefix);
  });

  it("signs in, creates, lists and revokes, and a signed-out cookie stays dead", async () => {
    const user = await registerUser(server);
    const cookie = await consoleSignIn(server, user.email, user.password);
    const created = await server.request(KEYS, { method: "POST", headers: withCookie(cookie), json: { name: "redis" } });
    expect(created.status).toBe(201);
    const list = await server.request(KEYS, { headers: withCookie(cookie) });
    expect(list.body.data.map((item: { id: string }) => item.id)).toEqual([created.body.id]);
    await server.request(`${KEYS}/${created.body.id}`, { method: "DELETE", headers: withCookie(cookie) });
    expect(await platformKeyState(server, created.body.key)).toBe("Invalid or expired API key");
    await server.request("/api/session", { method: "DELETE", headers: withCookie(cookie) });
    expect((await server.request(KEYS, { headers: withCookie(cookie) })).status).toBe(401);
  });
});
