import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, newUserBody, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

const G = "/gateway/v1";

describe("Gateway auth and keys", () => {
  let server: TestServer;
  let alice: Awaited<ReturnType<typeof registerUser>>;
  let bob: Awaited<ReturnType<typeof registerUser>>;

  beforeAll(async () => {
    server = await startTestServer({ LOGIN_MAX_FAILURES: "3", LOGIN_SLOW_MS: "250" });
    [alice, bob] = await Promise.all([registerUser(server), registerUser(server)]);
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  describe("register", () => {
    it("creates the user with a personal tenant and workspace and returns a session token", async () => {
      const body = newUserBody({ fullName: "Carol Example" });
      const res = await server.request(`${G}/auth/register`, { method: "POST", json: body });
      expect(res.status).toBe(201);
      expect(res.body.user).toMatchObject({ email: body.email, fullName: "Carol Example", plan: "free" });
      expect(res.body.user.id).toMatch(/^usr_/);
      expect(res.body.user.tenantId).toMatch(/^ten_/);
      expect(res.body.user.workspaceId).toMatch(/^ws_/);
      expect(res.body.user).not.toHaveProperty("passwordHash");
      expect(res.body.tokenType).toBe("Bearer");
      const me = await server.request(`${G}/auth/me`, { headers: bearer(res.body.token) });
      expect(me.status).toBe(200);
      expect(me.body.tenant.id).toBe(res.body.user.tenantId);
    });

    it("refuses a duplicate email with 409, whatever its case", async () => {
      const res = await server.request(`${G}/auth/register`, { method: "POST", json: newUserBody({ email: alice.email.toUpperCase() }) });
      expect(res.status).toBe(409);
      expect(res.body.error).toMatchObject({ code: "CONFLICT", message: "An account with this email already exists" });
    });

    it("lets exactly one of two concurrent registrations of one email win", async () => {
      const body = newUserBody();
      const [a, b] = await Promise.all([
        server.request(`${G}/auth/register`, { method: "POST", json: body }),
        server.request(`${G}/auth/register`, { method: "POST", json: body }),
      ]);
      expect([a.status, b.status].sort()).toEqual([201, 409]);
    });

    it.each([
      ["an invalid email", { email: "not-an-email" }, "email"],
      ["a short password", { password: "Ab1!" }, "password"],
      ["a password of one character class", { password: "aaaaaaaaaaaaaaaa" }, "password"],
      ["a missing fullName", { fullName: undefined }, "fullName"],
      ["a number for email", { email: 42 }, "email"],
    ])("refuses %s with 400 naming the field", async (_label, override, field) => {
      const res = await server.request(`${G}/auth/register`, { method: "POST", json: { ...newUserBody(), ...override } });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toMatch(/VALIDATION_FAILED|BAD_REQUEST/);
      expect(JSON.stringify(res.body.error.details)).toContain(field);
    });
  });

  describe("login", () => {
    it("returns a working session token", async () => {
      const res = await server.request(`${G}/auth/login`, { method: "POST", json: { email: alice.email, password: alice.password } });
      expect(res.status).toBe(200);
      const me = await server.request(`${G}/auth/me`, { headers: bearer(res.body.token) });
      expect(me.body.user.id).toBe(alice.user.id);
      expect(me.body.authenticatedBy).toBe("session");
    });

    it("answers a wrong password and an unknown email with the same 401", async () => {
      const wrong = await server.request(`${G}/auth/login`, { method: "POST", json: { email: bob.email, password: "Wrong-password-1" } });
      const unknown = await server.request(`${G}/auth/login`, {
        method: "POST",
        json: { email: "nobody@example.com", password: "Wrong-password-1" },
      });
      expect(wrong.status).toBe(401);
      expect(unknown.status).toBe(401);
      const strip = (body: any) => ({ ...body.error, requestId: undefined });
      expect(strip(wrong.body)).toEqual(strip(unknown.body));
    });

    it("slows repeated failures for one email and address: wrong passwords then get 429 with Retry-After, the right one still signs in", async () => {
      const victim = await registerUser(server);
      const attempt = (password: string) => server.request(`${G}/auth/login`, { method: "POST", json: { email: victim.email, password } });
      for (let i = 0; i < 3; i++) expect((await attempt("Wrong-password-1")).status).toBe(401);
      const blocked = await attempt("Wrong-password-1");
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThan(0);
      const started = Date.now();
      const owner = await attempt(victim.password);
      expect(owner.status).toBe(200);
      expect(Date.now() - started).toBeGreaterThanOrEqual(250); // LOGIN_SLOW_MS
    });

    it("revokes the token on logout", async () => {
      const login = await server.request(`${G}/auth/login`, { method: "POST", json: { email: bob.email, password: bob.password } });
      const token = login.body.token;
      expect((await server.request(`${G}/auth/logout`, { method: "POST", headers: bearer(token) })).status).toBe(200);
      const me = await server.request(`${G}/auth/me`, { headers: bearer(token) });
      expect(me.status).toBe(401);
    });
  });

  describe("credentials", () => {
    it("refuses a missing, malformed, tampered or foreign credential with 401", async () => {
      const tampered = alice.token.slice(0, -2) + (alice.token.endsWith("A") ? "BB" : "AA");
      for (const headers of <Record<string, string>[]>[
        {},
        { authorization: "Basic abc" },
        bearer("garbage"),
        bearer(tampered),
        bearer(`sk-other-${"a".repeat(46)}`),
        { "x-api-key": "nope" },
      ]) {
        const res = await server.request(`${G}/auth/me`, { headers });
        expect(res.status).toBe(401);
        expect(res.body.error.code).toBe("UNAUTHORIZED");
      }
    });

    it("refuses an expired session token", async () => {
      vi.useFakeTimers({ toFake: ["Date"] });
      try {
        const login = await server.request(`${G}/auth/login`, { method: "POST", json: { email: alice.email, password: alice.password } });
        vi.setSystemTime(Date.now() + 13 * 3600 * 1000);
        expect((await server.request(`${G}/auth/me`, { headers: bearer(login.body.token) })).status).toBe(401);
      } finally {
        vi.useRealTimers();
      }
    });
  });

  describe("keys", () => {
    it("creates a key shown once, accepted by Bearer and X-API-Key, listed without its secret", async () => {
      const created = await server.request(`${G}/auth/keys`, {
        method: "POST",
        headers: bearer(alice.token),
        json: { name: "ci", description: "for CI" },
      });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({ name: "ci", description: "for CI" });
      const key: string = created.body.key;
      expect(key).toMatch(/^sk_[0-9A-Za-z]{46}$/);

      const viaHeader = await server.request(`${G}/auth/me`, { headers: { "x-api-key": key } });
      expect(viaHeader.status).toBe(200);
      expect(viaHeader.body).toMatchObject({ authenticatedBy: "api_key", user: { id: alice.user.id } });
      expect((await server.request(`${G}/auth/me`, { headers: bearer(key) })).status).toBe(200);

      const list = await server.request(`${G}/auth/keys`, { headers: bearer(alice.token) });
      expect(list.status).toBe(200);
      const listed = list.body.find((k: any) => k.id === created.body.id);
      expect(listed).toMatchObject({ name: "ci", description: "for CI" });
      expect(listed.lastUsedAt).not.toBeNull();
      expect(JSON.stringify(list.body)).not.toContain(key);
      expect(server.rawLogs.join("\n")).not.toContain(key);
    });

    it("refuses a key with one character changed without finding it (checksum)", async () => {
      const created = await server.request(`${G}/auth/keys`, { method: "POST", headers: bearer(alice.token), json: { name: "typo" } });
      const key: string = created.body.key;
      const typo = key.slice(0, 10) + (key[10] === "a" ? "b" : "a") + key.slice(11);
      const res = await server.request(`${G}/auth/me`, { headers: { "x-api-key": typo } });
      expect(res.status).toBe(401);
    });

    it("does not let a key create or delete keys: 403 saying to sign in (a bad key stays 401)", async () => {
      const created = await server.request(`${G}/auth/keys`, { method: "POST", headers: bearer(alice.token), json: { name: "a" } });
      for (const headers of [{ "x-api-key": created.body.key }, bearer(created.body.key)]) {
        const res = await server.request(`${G}/auth/keys`, { method: "POST", headers, json: { name: "b" } });
        expect(res.status).toBe(403);
        expect(res.body.error).toMatchObject({ code: "FORBIDDEN", message: "API keys cannot manage keys; sign in" });
        const del = await server.request(`${G}/auth/keys/${created.body.id}`, { method: "DELETE", headers });
        expect(del.status).toBe(403);
        expect(del.body.error.message).toBe("API keys cannot manage keys; sign in");
      }
      // Over /rpc too: the same method, the same answer.
      const rpc = await server.request("/rpc", {
        method: "POST",
        headers: { "x-api-key": created.body.key },
        json: { jsonrpc: "2.0", id: 1, method: "auth.keys.create", params: { name: "c" } },
      });
      expect(rpc.body.error).toMatchObject({ code: -32003, message: "API keys cannot manage keys; sign in" });
      // A revoked (or mistyped) key is still a 401.
      await server.request(`${G}/auth/keys/${created.body.id}`, { method: "DELETE", headers: bearer(alice.token) });
      const revoked = await server.request(`${G}/auth/keys`, {
        method: "POST",
        headers: { "x-api-key": created.body.key },
        json: { name: "d" },
      });
      expect(revoked.status).toBe(401);
      expect(
        (await server.request(`${G}/auth/keys`, { headers: bearer(alice.token) })).body.map((key: { name: string }) => key.name),
      ).not.toContain("b");
    });

    it("gives another user's key id the same 404 as a missing one", async () => {
      const created = await server.request(`${G}/auth/keys`, { method: "POST", headers: bearer(alice.token), json: { name: "mine" } });
      const foreign = await server.request(`${G}/auth/keys/${created.body.id}`, { method: "DELETE", headers: bearer(bob.token) });
      const missing = await server.request(`${G}/auth/keys/key_doesnotexist`, { method: "DELETE", headers: bearer(bob.token) });
      expect(foreign.status).toBe(404);
      expect(missing.status).toBe(404);
      expect({ ...foreign.body.error, requestId: 0 }).toEqual({ ...missing.body.error, requestId: 0 });
      expect((await server.request(`${G}/auth/me`, { headers: { "x-api-key": created.body.key } })).status).toBe(200);
    });

    it("refuses a deleted key with 401 on its next use and drops it from the list", async () => {
      const created = await server.request(`${G}/auth/keys`, { method: "POST", headers: bearer(alice.token), json: { name: "doomed" } });
      expect((await server.request(`${G}/auth/me`, { headers: { "x-api-key": created.body.key } })).status).toBe(200);
      const del = await server.request(`${G}/auth/keys/${created.body.id}`, { method: "DELETE", headers: bearer(alice.token) });
      expect(del.status).toBe(200);
      expect(del.body.success).toBe(true);
      expect((await server.request(`${G}/auth/me`, { headers: { "x-api-key": created.body.key } })).status).toBe(401);
      const list = await server.request(`${G}/auth/keys`, { headers: bearer(alice.token) });
      expect(list.body.map((k: any) => k.id)).not.toContain(created.body.id);
    });

    it("validates the create body", async () => {
      const res = await server.request(`${G}/auth/keys`, { method: "POST", headers: bearer(alice.token), json: { name: 5 } });
      expect(res.status).toBe(400);
      expect(res.body.error.details.issues[0].path).toBe("name");
    });
  });

  it("writes one JSON log line per request with a request id and no secrets", async () => {
    const before = server.rawLogs.length;
    const res = await server.request(`${G}/auth/me`, { headers: bearer(alice.token) });
    const lines = server.logs().slice(before);
    const line = lines.find((l) => l.requestId === res.headers.get("x-request-id"));
    expect(line).toMatchObject({ level: "info", method: "GET", path: `${G}/auth/me`, status: 200, operation: "auth.me" });
    expect(server.rawLogs.join("\n")).not.toContain(alice.token);
    expect(server.rawLogs.join("\n")).not.toContain(alice.password);
  });
});

describe("fs storage across a restart", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gw-restart-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps users and keys, and never writes a plaintext secret to disk", async () => {
    const env = { STORAGE: "fs", DATA_DIR: dir };
    let server = await startTestServer(env);
    const user = await registerUser(server);
    const created = await server.request(`${G}/auth/keys`, { method: "POST", headers: bearer(user.token), json: { name: "kept" } });
    const key: string = created.body.key;
    await server.close();

    const files: string[] = [];
    const walk = async (path: string): Promise<void> => {
      for (const entry of await readdir(path)) {
        const full = join(path, entry);
        if ((await stat(full)).isDirectory()) await walk(full);
        else files.push(full);
      }
    };
    await walk(dir);
    // The records are in the fs engine's snapshot (docs/storage.md), beside the generated secrets.
    expect(files.some((file) => file.endsWith(join(".store", "snapshot")))).toBe(true);
    for (const file of files) {
      const text = await readFile(file, "utf8");
      expect(text).not.toContain(key);
      expect(text).not.toContain(user.password);
      expect(text).not.toContain(user.token);
    }

    server = await startTestServer(env);
    try {
      const login = await server.request(`${G}/auth/login`, { method: "POST", json: { email: user.email, password: user.password } });
      expect(login.status).toBe(200);
      expect((await server.request(`${G}/auth/me`, { headers: { "x-api-key": key } })).status).toBe(200);
      const list = await server.request(`${G}/auth/keys`, { headers: bearer(login.body.token) });
      expect(list.body.map((k: any) => k.name)).toEqual(["kept"]);
    } finally {
      await server.close();
    }
  });
});
