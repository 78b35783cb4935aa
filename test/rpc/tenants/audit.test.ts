import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { serveScripted } from "../../helpers/upstream.js";
import { consoleSignIn, withCookie } from "../../helpers/console.js";
import { runAdmin } from "../../../scripts/admin-commands.js";

/**
 * The audit log (docs/audit.md): one test per audited family (keys, members and roles, tenant
 * settings and allow-lists, credits, models, MCP servers, webhooks), what a record holds (actor,
 * tenant, action, target, time, request id, a summary without secrets), the listing's pages,
 * and who may read it: another tenant's log is the same 404 as a missing tenant.
 */

const SERVICE_KEY = "service-key-for-audit-tests-0123456789";

let server: TestServer;
let upstream: Awaited<ReturnType<typeof serveScripted>>;
let alice: Awaited<ReturnType<typeof registerUser>>;
let bob: Awaited<ReturnType<typeof registerUser>>;

interface AuditRecord {
  id: string;
  tenantId: string;
  at: string;
  actor: { kind: string; userId: string | null; keyId: string | null };
  action: string;
  target: string;
  requestId: string;
  changes: Record<string, unknown>;
}

/** Every record of a tenant's log, newest first, as `token` reads it page by page. */
async function auditOf(tenantId: string, token = alice.token): Promise<AuditRecord[]> {
  const records: AuditRecord[] = [];
  let cursor: string | null = null;
  do {
    const res = await server.request(`/gateway/v1/tenants/${tenantId}/audit?limit=200${cursor ? `&cursor=${cursor}` : ""}`, {
      headers: bearer(token),
    });
    expect(res.status).toBe(200);
    records.push(...res.body.data);
    cursor = res.body.nextCursor;
  } while (cursor);
  return records;
}

const find = (records: AuditRecord[], action: string, target: string) => records.find((r) => r.action === action && r.target === target);

beforeAll(async () => {
  upstream = await serveScripted([
    { tool: { name: "ping", description: "ping", inputSchema: { type: "object" } }, run: () => ({ content: [] }) },
  ]);
  server = await startTestServer({
    PLATFORM_SERVICE_KEY: SERVICE_KEY,
    MCP_SERVERS_ALLOW_PRIVATE: "true",
    WEBHOOKS_ALLOW_PRIVATE: "true",
    WEBHOOKS_POLL_MS: "0",
    GATEWAY_RATE_LIMIT_RPM: "100000",
  });
  alice = await registerUser(server);
  bob = await registerUser(server);
  await runAdmin(["grant-operator", "--email", alice.email], server.composition);
});

afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
  await upstream.close();
});

describe("audit records", () => {
  it("records keys created, updated and revoked, with the actor, the request id and never the secret", async () => {
    const created = await server.request("/gateway/v1/auth/keys", {
      method: "POST",
      headers: bearer(alice.token),
      json: { name: "ci", allowedModels: ["echo-*"] },
    });
    expect(created.status).toBe(201);
    const patched = await server.request(`/gateway/v1/auth/keys/${created.body.id}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { allowedTools: ["calculator"] },
    });
    expect(patched.status).toBe(200);
    const personal = await server.request("/account/v1/keys", { method: "POST", headers: bearer(alice.token), json: { name: "laptop" } });
    await server.request(`/gateway/v1/auth/keys/${created.body.id}`, { method: "DELETE", headers: bearer(alice.token) });

    const records = await auditOf(alice.user.tenantId);
    const made = find(records, "key.created", created.body.id)!;
    expect(made).toMatchObject({
      tenantId: alice.user.tenantId,
      actor: { kind: "session", userId: alice.user.id, keyId: null },
      requestId: created.headers.get("x-request-id"),
      changes: { kind: "gateway", name: "ci", allowedModels: ["echo-*"], allowedTools: null },
    });
    expect(Date.parse(made.at)).toBeGreaterThan(Date.now() - 60_000);
    expect(find(records, "key.updated", created.body.id)?.changes).toEqual({ kind: "gateway", allowedTools: ["calculator"] });
    expect(find(records, "key.revoked", created.body.id)).toBeDefined();
    expect(find(records, "key.created", personal.body.id)?.changes.kind).toBe("account");
    // Newest first.
    expect(records.findIndex((r) => r.action === "key.revoked")).toBeLessThan(records.findIndex((r) => r.action === "key.created"));
    const text = JSON.stringify(records);
    for (const secret of [created.body.key, personal.body.key]) expect(text).not.toContain(secret);
  });

  it("records platform keys and their limits under the workspace's tenant, with the console session as actor", async () => {
    const cookie = await consoleSignIn(server, alice.email, alice.password);
    const made = await server.request("/api/api-keys", { method: "POST", headers: withCookie(cookie), json: { name: "prod" } });
    await server.request(`/api/api-keys/${made.body.id}`, {
      method: "PATCH",
      headers: withCookie(cookie),
      json: { rpmLimit: 10, spendLimit: 5 },
    });
    await server.request(`/api/api-keys/${made.body.id}`, { method: "DELETE", headers: withCookie(cookie) });
    const records = await auditOf(alice.user.tenantId);
    expect(find(records, "key.created", made.body.id)).toMatchObject({
      actor: { kind: "console", userId: alice.user.id },
      changes: { kind: "platform" },
    });
    expect(find(records, "key.updated", made.body.id)?.changes).toEqual({ kind: "platform", rpmLimit: 10, spendLimit: 5 });
    expect(find(records, "key.revoked", made.body.id)).toBeDefined();
    expect(JSON.stringify(records)).not.toContain(made.body.key);
  });

  it("records members added, their role changed and removed, and tenant settings", async () => {
    const tenant = (
      await server.request("/gateway/v1/tenants", {
        method: "POST",
        headers: bearer(alice.token),
        json: { slug: `team-${Date.now()}`, name: "Team" },
      })
    ).body;
    await server.request(`/gateway/v1/tenants/${tenant.id}/members`, {
      method: "POST",
      headers: bearer(alice.token),
      json: { userId: bob.user.id, role: "member" },
    });
    await server.request(`/gateway/v1/tenants/${tenant.id}/members/${bob.user.id}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { role: "viewer" },
    });
    await server.request(`/gateway/v1/tenants/${tenant.id}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { limits: { agents: 3 }, allowedModels: ["echo-1"] },
    });
    // A viewer may not read the log; someone outside the tenant gets the same 404 as a missing one.
    expect((await server.request(`/gateway/v1/tenants/${tenant.id}/audit`, { headers: bearer(bob.token) })).status).toBe(403);
    await server.request(`/gateway/v1/tenants/${tenant.id}/members/${bob.user.id}`, { method: "DELETE", headers: bearer(alice.token) });
    const stranger = await server.request(`/gateway/v1/tenants/${tenant.id}/audit`, { headers: bearer(bob.token) });
    const missing = await server.request("/gateway/v1/tenants/ten_missing/audit", { headers: bearer(bob.token) });
    expect([stranger.status, missing.status]).toEqual([404, 404]);

    const records = await auditOf(tenant.id);
    expect(records.map((r) => r.action)).toEqual([
      "member.removed",
      "tenant.updated",
      "member.role_changed",
      "member.added",
      "tenant.created",
    ]);
    expect(find(records, "tenant.created", tenant.id)?.changes).toMatchObject({ name: "Team", plan: "free" });
    expect(find(records, "member.added", bob.user.id)?.changes).toEqual({ role: "member" });
    expect(find(records, "member.role_changed", bob.user.id)?.changes).toEqual({ role: "viewer" });
    expect(find(records, "tenant.updated", tenant.id)?.changes).toEqual({ limits: { agents: 3 }, allowedModels: ["echo-1"] });
    // None of it is in Alice's personal tenant's log, nor readable as Bob's.
    expect((await auditOf(alice.user.tenantId)).some((r) => r.action.startsWith("member."))).toBe(false);
    expect(await auditOf(bob.user.tenantId, bob.token)).toEqual([]);
  });

  it("records credits granted under the workspace's tenant, and models changed by an operator", async () => {
    const grant = await server.request("/gateway/v1/operator/credits", {
      method: "POST",
      headers: bearer(SERVICE_KEY),
      json: { workspaceId: bob.user.workspaceId, credits: 2.5 },
    });
    expect(grant.status).toBe(200);
    const bobs = await auditOf(bob.user.tenantId, bob.token);
    expect(find(bobs, "credits.granted", bob.user.workspaceId)).toMatchObject({
      actor: { kind: "service", userId: null, keyId: null },
      changes: { microCredits: 2_500_000 },
    });

    const model = `audited-${Date.now()}`;
    expect(
      (await server.request("/gateway/v1/model-registry/models", { method: "POST", headers: bearer(alice.token), json: { id: model } }))
        .status,
    ).toBe(201);
    await server.request(`/gateway/v1/model-registry/models/${model}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { status: "deprecated" },
    });
    const records = await auditOf(alice.user.tenantId);
    expect(find(records, "model.created", model)).toBeDefined();
    expect(find(records, "model.updated", model)?.changes).toEqual({ status: "deprecated" });
  });

  it("records MCP servers registered and removed with their header values redacted", async () => {
    const registered = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: bearer(alice.token),
      json: { name: "audited", url: upstream.url, headers: { authorization: "Bearer upstream-secret-4411" } },
    });
    expect(registered.status).toBe(201);
    await server.request("/gateway/v1/mcp/servers/audited", { method: "DELETE", headers: bearer(alice.token) });
    const records = await auditOf(alice.user.tenantId);
    expect(find(records, "mcp_server.registered", "audited")?.changes).toMatchObject({
      name: "audited",
      url: upstream.url,
      headers: "[redacted]",
    });
    expect(find(records, "mcp_server.removed", "audited")).toBeDefined();
    expect(JSON.stringify(records)).not.toContain("upstream-secret-4411");
  });

  it("records webhooks created, updated, rotated and deleted, never their signing secrets", async () => {
    const created = await server.request("/gateway/v1/webhooks/subscriptions", {
      method: "POST",
      headers: bearer(alice.token),
      json: { url: "http://127.0.0.1:9/hook" },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await server.request(`/gateway/v1/webhooks/subscriptions/${id}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { enabled: false },
    });
    const rotated = await server.request(`/gateway/v1/webhooks/subscriptions/${id}/rotate-secret`, {
      method: "POST",
      headers: bearer(alice.token),
    });
    await server.request(`/gateway/v1/webhooks/subscriptions/${id}`, { method: "DELETE", headers: bearer(alice.token) });
    const records = await auditOf(alice.user.tenantId);
    expect(find(records, "webhook.created", id)?.changes).toMatchObject({ url: "http://127.0.0.1:9/hook" });
    expect(find(records, "webhook.updated", id)?.changes).toEqual({ enabled: false });
    expect(find(records, "webhook.secret_rotated", id)).toBeDefined();
    expect(find(records, "webhook.deleted", id)).toBeDefined();
    const text = JSON.stringify(records);
    for (const secret of [created.body.secret, rotated.body.secret]) expect(text).not.toContain(secret);
  });

  it("pages the log newest first and refuses a cursor it did not give", async () => {
    const first = await server.request(`/gateway/v1/tenants/${alice.user.tenantId}/audit?limit=2`, { headers: bearer(alice.token) });
    expect(first.body.data).toHaveLength(2);
    const second = await server.request(`/gateway/v1/tenants/${alice.user.tenantId}/audit?limit=2&cursor=${first.body.nextCursor}`, {
      headers: bearer(alice.token),
    });
    expect(second.body.data).toHaveLength(2);
    const all = await auditOf(alice.user.tenantId);
    expect([...first.body.data, ...second.body.data].map((r: AuditRecord) => r.id)).toEqual(all.slice(0, 4).map((r) => r.id));
    expect(all.map((r) => r.at)).toEqual([...all.map((r) => r.at)].sort().reverse());
    const bad = await server.request(`/gateway/v1/tenants/${alice.user.tenantId}/audit?cursor=../x`, { headers: bearer(alice.token) });
    expect(bad.status).toBe(400);
  });
});

describe("when the audit record cannot be stored", () => {
  it("the change stands and is answered (a new key's secret is not lost), and the request's log line carries the record", async () => {
    const audit = server.composition.ports.repos.audit;
    const append = audit.append;
    audit.append = async () => {
      throw new Error("storage refused the write");
    };
    try {
      const created = await server.request("/gateway/v1/auth/keys", {
        method: "POST",
        headers: bearer(alice.token),
        json: { name: "while-audit-is-down" },
      });
      expect(created.status).toBe(201);
      expect((await server.request("/gateway/v1/models", { headers: bearer(created.body.key) })).status).toBe(200);
      const line = server.logs().find((entry) => (entry.auditUnstored as AuditRecord | undefined)?.action === "key.created");
      expect(line).toMatchObject({ auditError: "storage refused the write", auditUnstored: { target: created.body.id } });
      expect(JSON.stringify(line)).not.toContain(created.body.key);
    } finally {
      audit.append = append;
    }
  });
});
