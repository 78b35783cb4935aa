import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { MICRO, platformAccount, userMessage } from "../../helpers/chat.js";

const G = "/gateway/v1";
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
}, 30_000);
afterAll(async () => {
  await server?.close();
});

describe("workspaces", () => {
  it("creates a workspace in a tenant the caller administers, and shows status, balance and key count", async () => {
    const alice = await registerUser(server);
    const bob = await registerUser(server);
    const created = await server.request(`${G}/workspaces`, {
      method: "POST",
      headers: bearer(alice.token),
      json: { tenantId: alice.user.tenantId, name: "Prod" },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ tenantId: alice.user.tenantId, name: "Prod", status: "active", creditBalance: 0, keyCount: 0 });
    expect((await server.request(`${G}/workspaces/${created.body.id}`, { headers: bearer(bob.token) })).status).toBe(404);
    const notAdmin = await server.request(`${G}/workspaces`, {
      method: "POST",
      headers: bearer(bob.token),
      json: { tenantId: alice.user.tenantId, name: "Mine" },
    });
    expect(notAdmin.status).toBe(404);
    const list = await server.request(`${G}/workspaces`, { headers: bearer(alice.token) });
    expect(list.body.workspaces.map((w: any) => w.name)).toEqual(["Default", "Prod"]);
  });

  it("archives: keys refused with 403 and no credits spent; reactivating restores it; lists show active by default", async () => {
    const account = await platformAccount(server, 5);
    const token = account.user.token;
    const chat = () =>
      server.request("/api/v1/chat/completions", {
        method: "POST",
        headers: bearer(account.key),
        json: { model: "echo-1", messages: userMessage("hello") },
      });
    expect((await chat()).status).toBe(200);
    const before = await server.request(`${G}/workspaces/${account.workspaceId}`, { headers: bearer(token) });
    expect(before.body.keyCount).toBe(1);
    const archived = await server.request(`${G}/workspaces/${account.workspaceId}?status=archived`, {
      method: "PATCH",
      headers: bearer(token),
    });
    expect(archived.status).toBe(200);
    expect(archived.body.status).toBe("archived");
    const refused = await chat();
    expect(refused.status).toBe(403);
    expect(refused.body.error.type).toBe("permission_error");
    expect(refused.body.error.message).toContain("is archived");
    expect(refused.headers.get("x-service-request-id")).toBeNull();
    expect(await server.composition.ports.repos.credits.balance(account.workspaceId)).toBe(before.body.creditBalance);
    expect((await server.request(`${G}/workspaces`, { headers: bearer(token) })).body.count).toBe(0);
    expect((await server.request(`${G}/workspaces?status=all`, { headers: bearer(token) })).body.count).toBe(1);
    const active = await server.request(`${G}/workspaces/${account.workspaceId}?status=active`, {
      method: "PATCH",
      headers: bearer(token),
    });
    expect(active.body.status).toBe("active");
    expect((await chat()).status).toBe(200);
    expect(before.body.creditBalance).toBeLessThanOrEqual(5 * MICRO);
  });

  it("answers bad input in the Gateway envelope", async () => {
    const alice = await registerUser(server);
    const badStatus = await server.request(`${G}/workspaces/${alice.user.workspaceId}?status=deleted`, {
      method: "PATCH",
      headers: bearer(alice.token),
    });
    expect(badStatus.status).toBe(400);
    expect(badStatus.body.error.code).toBe("VALIDATION_FAILED");
    expect(badStatus.body.error.message).toContain("status must be one of: active, archived");
    const noStatus = await server.request(`${G}/workspaces/${alice.user.workspaceId}`, { method: "PATCH", headers: bearer(alice.token) });
    expect(noStatus.status).toBe(400);
    const noName = await server.request(`${G}/workspaces`, {
      method: "POST",
      headers: bearer(alice.token),
      json: { tenantId: alice.user.tenantId },
    });
    expect(noName.status).toBe(400);
    const missing = await server.request(`${G}/workspaces/ws_missing`, { headers: bearer(alice.token) });
    expect(missing.status).toBe(404);
  });
});
