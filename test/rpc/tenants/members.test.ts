import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { connectStream } from "../../helpers/agent-stream.js";

const G = "/gateway/v1";
let server: TestServer;
let alice: Awaited<ReturnType<typeof registerUser>>;
let bob: Awaited<ReturnType<typeof registerUser>>;
let carol: Awaited<ReturnType<typeof registerUser>>;
let n = 0;

async function newTenant(token = alice.token): Promise<string> {
  const res = await server.request(`${G}/tenants`, {
    method: "POST",
    headers: bearer(token),
    json: { slug: `m-${Date.now()}-${++n}`, name: "Team" },
  });
  expect(res.status).toBe(201);
  return res.body.id;
}
const add = (tenantId: string, json: unknown, token = alice.token) =>
  server.request(`${G}/tenants/${tenantId}/members`, { method: "POST", headers: bearer(token), json });

beforeAll(async () => {
  server = await startTestServer();
  [alice, bob, carol] = [await registerUser(server), await registerUser(server), await registerUser(server)];
}, 30_000);
afterAll(async () => {
  await server?.close();
});

describe("tenant members", () => {
  it("lists the creator as owner, adds by email or id, and shows the tenant to the new member with their role", async () => {
    const tenantId = await newTenant();
    const listed = await server.request(`${G}/tenants/${tenantId}/members`, { headers: bearer(alice.token) });
    expect(listed.body.members.map((m: any) => [m.userId, m.role])).toEqual([[alice.user.id, "owner"]]);
    expect((await add(tenantId, { email: bob.email, role: "member" })).status).toBe(201);
    expect((await add(tenantId, { userId: carol.user.id, role: "viewer" })).status).toBe(201);
    const bobsTenants = await server.request(`${G}/tenants`, { headers: bearer(bob.token) });
    expect(bobsTenants.body.find((t: any) => t.id === tenantId).role).toBe("member");
    const got = await server.request(`${G}/tenants/${tenantId}`, { headers: bearer(carol.token) });
    expect(got.status).toBe(200);
    expect(got.body.role).toBe("viewer");
  });

  it("answers bad input in the Gateway envelope", async () => {
    const tenantId = await newTenant();
    await add(tenantId, { userId: bob.user.id, role: "member" });
    const twice = await add(tenantId, { userId: bob.user.id, role: "viewer" });
    expect(twice.status).toBe(409);
    expect(twice.body.error.code).toBe("CONFLICT");
    expect(twice.body.error.message).toContain("already a member");
    const creatorAgain = await add(tenantId, { userId: alice.user.id, role: "viewer" });
    expect(creatorAgain.status).toBe(409);
    const unknown = await add(tenantId, { email: "nobody-here@example.com", role: "member" });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toContain("No user with email");
    const badRole = await add(tenantId, { userId: carol.user.id, role: "superuser" });
    expect(badRole.status).toBe(400);
    expect(badRole.body.error.message).toContain("role must be one of: viewer, member, admin, owner");
    const neither = await add(tenantId, { role: "member" });
    expect(neither.status).toBe(400);
    const lastOwner = await server.request(`${G}/tenants/${tenantId}/members/${alice.user.id}`, {
      method: "DELETE",
      headers: bearer(alice.token),
    });
    expect(lastOwner.status).toBe(409);
    expect(lastOwner.body.error.details.reason).toBe("last_owner");
    const demote = await server.request(`${G}/tenants/${tenantId}/members/${alice.user.id}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { role: "admin" },
    });
    expect(demote.status).toBe(409);
    const notMember = await server.request(`${G}/tenants/${tenantId}/members/${carol.user.id}`, {
      method: "DELETE",
      headers: bearer(alice.token),
    });
    expect(notMember.status).toBe(404);
  });

  it("transfers ownership: a second owner, then the first leaves", async () => {
    const tenantId = await newTenant();
    await add(tenantId, { userId: bob.user.id, role: "admin" });
    const adminGrantsOwner = await server.request(`${G}/tenants/${tenantId}/members/${carol.user.id}`, {
      method: "PATCH",
      headers: bearer(bob.token),
      json: { role: "owner" },
    });
    expect(adminGrantsOwner.status).toBe(404); // carol is not a member yet
    const promoteSelf = await server.request(`${G}/tenants/${tenantId}/members/${bob.user.id}`, {
      method: "PATCH",
      headers: bearer(bob.token),
      json: { role: "owner" },
    });
    expect(promoteSelf.status).toBe(403);
    const promote = await server.request(`${G}/tenants/${tenantId}/members/${bob.user.id}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { role: "owner" },
    });
    expect(promote.status).toBe(200);
    const leave = await server.request(`${G}/tenants/${tenantId}/members/${alice.user.id}`, {
      method: "DELETE",
      headers: bearer(alice.token),
    });
    expect(leave.status).toBe(200);
    expect((await server.request(`${G}/tenants/${tenantId}`, { headers: bearer(alice.token) })).status).toBe(404);
    const bobLast = await server.request(`${G}/tenants/${tenantId}/members/${bob.user.id}`, {
      method: "DELETE",
      headers: bearer(bob.token),
    });
    expect(bobLast.status).toBe(409);
  });

  it("never lets two owners remove each other at once", async () => {
    const tenantId = await newTenant();
    await add(tenantId, { userId: bob.user.id, role: "owner" });
    const [a, b] = await Promise.all([
      server.request(`${G}/tenants/${tenantId}/members/${bob.user.id}`, { method: "DELETE", headers: bearer(alice.token) }),
      server.request(`${G}/tenants/${tenantId}/members/${alice.user.id}`, { method: "DELETE", headers: bearer(bob.token) }),
    ]);
    // The loser is no longer a member (404) or would remove the last owner (409): one owner stays.
    expect([a.status, b.status].filter((status) => status === 200)).toHaveLength(1);
    const members = await server.composition.ports.repos.members.list(tenantId);
    expect(members.filter((member) => member.role === "owner")).toHaveLength(1);
  });

  it("keeps a personal tenant's user as its owner", async () => {
    await add(alice.user.tenantId, { userId: bob.user.id, role: "owner" });
    const res = await server.request(`${G}/tenants/${alice.user.tenantId}/members/${alice.user.id}`, {
      method: "DELETE",
      headers: bearer(bob.token),
    });
    expect(res.status).toBe(409);
    expect(res.body.error.details.reason).toBe("personal_tenant");
  });

  it("takes access away at once from a removed member, agents included", async () => {
    const tenantId = await newTenant();
    await add(tenantId, { userId: bob.user.id, role: "member" });
    const agent = await server.request(`${G}/agents`, {
      method: "POST",
      headers: bearer(bob.token),
      json: { name: "bobs", model: "echo-1", tenantId },
    });
    expect(agent.status).toBe(201);
    // The owner sees the agent a member made; the member sees it in their list.
    expect((await server.request(`${G}/agents/${agent.body.id}`, { headers: bearer(alice.token) })).status).toBe(200);
    const bobsAgents = await server.request(`${G}/agents`, { headers: bearer(bob.token) });
    expect(bobsAgents.body.map((a: any) => a.id)).toContain(agent.body.id);
    expect(
      (await server.request(`${G}/tenants/${tenantId}/members/${bob.user.id}`, { method: "DELETE", headers: bearer(alice.token) })).status,
    ).toBe(200);
    const after = await server.request(`${G}/agents/${agent.body.id}/invoke`, {
      method: "POST",
      headers: bearer(bob.token),
      json: { input: "hi" },
    });
    expect(after.status).toBe(404);
    expect((await server.request(`${G}/agents`, { headers: bearer(bob.token) })).body.map((a: any) => a.id)).not.toContain(agent.body.id);
    expect((await server.request(`${G}/tenants`, { headers: bearer(bob.token) })).body.map((t: any) => t.id)).not.toContain(tenantId);
  });
});

describe("a removed member loses access at once, on an open agent stream too", () => {
  it("answers the next message of the removed member's open socket like a missing agent", async () => {
    const tenantId = await newTenant();
    expect((await add(tenantId, { userId: bob.user.id, role: "member" })).status).toBe(201);
    const models = await server.request(`${G}/models`, { headers: bearer(alice.token) });
    const echo = models.body.data.find((model: { id: string }) => model.id.startsWith("echo")).id;
    const agent = await server.request(`${G}/agents`, {
      method: "POST",
      headers: bearer(alice.token),
      json: { name: "shared", model: echo, tenantId },
    });
    expect(agent.status).toBe(201);

    const socket = await connectStream(server.origin, { token: bob.token });
    try {
      socket.send({ id: "before", agentId: agent.body.id, input: "member run" });
      expect((await socket.waitFor((frame) => frame.type === "done" && frame.id === "before")).output).toBe("member run");

      expect(
        (await server.request(`${G}/tenants/${tenantId}/members/${bob.user.id}`, { method: "DELETE", headers: bearer(alice.token) }))
          .status,
      ).toBe(200);
      socket.send({ id: "after", agentId: agent.body.id, input: "former member run" });
      const refused = await socket.waitFor((frame) => frame.type === "error" && frame.id === "after");
      socket.send({ id: "missing", agentId: "agt_does_not_exist", input: "x" });
      const missing = await socket.waitFor((frame) => frame.type === "error" && frame.id === "missing");
      expect(refused.code).toBe("NOT_FOUND");
      expect(refused.code).toBe(missing.code);
      // Alice's agent is untouched and still hers.
      expect((await server.request(`${G}/agents/${agent.body.id}`, { headers: bearer(alice.token) })).status).toBe(200);
    } finally {
      await socket.close();
    }
  });
});
