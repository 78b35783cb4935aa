import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/** Walks the route table of docs/tenants.md "Route table" for every role and a non-member. */
const G = "/gateway/v1";
const ROLES = ["viewer", "member", "admin", "owner"] as const;
type Role = (typeof ROLES)[number];

interface Row {
  route: string;
  allowed: Record<Role, boolean>;
}

function readTable(): Row[] {
  const doc = readFileSync(new URL("../../../docs/tenants.md", import.meta.url), "utf8");
  const table = doc.split("<!-- role-table:start -->")[1]!.split("<!-- role-table:end -->")[0]!;
  return table
    .split("\n")
    .filter((line) => line.startsWith("| ") && !line.startsWith("| route") && !line.startsWith("|---"))
    .map((line) => {
      const cells = line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim());
      const allowed = Object.fromEntries(ROLES.map((role, i) => [role, cells[i + 1] === "✓"])) as Record<Role, boolean>;
      return { route: cells[0]!, allowed };
    });
}

let server: TestServer;
let owner: Awaited<ReturnType<typeof registerUser>>;
let outsider: Awaited<ReturnType<typeof registerUser>>;
const tokens = {} as Record<Role, string>;
let tenantId = "";
let agentId = "";
let workspaceId = "";
let artifactId = "";

/** A fresh user id to add (each allowed add needs one that is not a member yet). */
async function freshUser(): Promise<string> {
  return (await registerUser(server)).user.id;
}

/** How each documented route is called: method, path and body, with the fixtures filled in. */
const CALLS: Record<string, () => Promise<{ method: string; path: string; json?: unknown }>> = {
  "GET /tenants/{tenant}": async () => ({ method: "GET", path: `/tenants/${tenantId}` }),
  "PATCH /tenants/{tenant}": async () => ({ method: "PATCH", path: `/tenants/${tenantId}`, json: { name: "Renamed" } }),
  "GET /tenants/{tenant}/members": async () => ({ method: "GET", path: `/tenants/${tenantId}/members` }),
  "POST /tenants/{tenant}/members (role member)": async () => ({
    method: "POST",
    path: `/tenants/${tenantId}/members`,
    json: { userId: await freshUser(), role: "member" },
  }),
  "POST /tenants/{tenant}/members (role owner)": async () => ({
    method: "POST",
    path: `/tenants/${tenantId}/members`,
    json: { userId: await freshUser(), role: "owner" },
  }),
  "GET /agents?tenantId={tenant}": async () => ({ method: "GET", path: `/agents?tenantId=${tenantId}` }),
  "POST /agents": async () => ({ method: "POST", path: "/agents", json: { name: "made", model: "echo-1", tenantId } }),
  "GET /agents/{agent}": async () => ({ method: "GET", path: `/agents/${agentId}` }),
  "PUT /agents/{agent}": async () => ({ method: "PUT", path: `/agents/${agentId}`, json: { description: "changed" } }),
  "POST /agents/{agent}/invoke": async () => ({ method: "POST", path: `/agents/${agentId}/invoke`, json: { input: "hello" } }),
  "GET /agents/{agent}/logs": async () => ({ method: "GET", path: `/agents/${agentId}/logs` }),
  "DELETE /agents/{agent}": async () => ({ method: "DELETE", path: `/agents/${agentId}` }),
  "GET /mcp/servers?tenantId={tenant}": async () => ({ method: "GET", path: `/mcp/servers?tenantId=${tenantId}` }),
  "DELETE /mcp/servers/none?tenantId={tenant}": async () => ({ method: "DELETE", path: `/mcp/servers/none?tenantId=${tenantId}` }),
  "GET /mcp/router/tools?tenantId={tenant}": async () => ({ method: "GET", path: `/mcp/router/tools?tenantId=${tenantId}` }),
  "POST /mcp/plan": async () => ({ method: "POST", path: "/mcp/plan", json: { input: "echo hello", tenantId } }),
  "GET /workspaces?tenantId={tenant}": async () => ({ method: "GET", path: `/workspaces?tenantId=${tenantId}` }),
  "POST /workspaces": async () => ({ method: "POST", path: "/workspaces", json: { tenantId, name: "More" } }),
  "GET /workspaces/{workspace}": async () => ({ method: "GET", path: `/workspaces/${workspaceId}` }),
  "PATCH /workspaces/{workspace}?status=active": async () => ({ method: "PATCH", path: `/workspaces/${workspaceId}?status=active` }),
  "GET /workspaces/{workspace}/artifacts": async () => ({ method: "GET", path: `/workspaces/${workspaceId}/artifacts` }),
  "POST /workspaces/{workspace}/artifacts": async () => ({
    method: "POST",
    path: `/workspaces/${workspaceId}/artifacts`,
    json: { name: "a.txt", content: "aGk=" },
  }),
  "GET /workspaces/{workspace}/artifacts/{artifact}/content": async () => ({
    method: "GET",
    path: `/workspaces/${workspaceId}/artifacts/${artifactId}/content`,
  }),
  "DELETE /workspaces/{workspace}/artifacts/{artifact}": async () => ({
    method: "DELETE",
    path: `/workspaces/${workspaceId}/artifacts/${artifactId}`,
  }),
};

const rows = readTable();

beforeAll(async () => {
  server = await startTestServer();
  owner = await registerUser(server);
  outsider = await registerUser(server);
  tokens.owner = owner.token;
  const tenant = await server.request(`${G}/tenants`, {
    method: "POST",
    headers: bearer(owner.token),
    json: { slug: `walk-${Date.now()}`, name: "Walk" },
  });
  tenantId = tenant.body.id;
  for (const role of ["viewer", "member", "admin"] as const) {
    const user = await registerUser(server);
    tokens[role] = user.token;
    const added = await server.request(`${G}/tenants/${tenantId}/members`, {
      method: "POST",
      headers: bearer(owner.token),
      json: { email: user.email, role },
    });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
  }
  const agent = await server.request(`${G}/agents`, {
    method: "POST",
    headers: bearer(owner.token),
    json: { name: "walked", model: "echo-1", tenantId },
  });
  agentId = agent.body.id;
  const workspace = await server.request(`${G}/workspaces`, {
    method: "POST",
    headers: bearer(owner.token),
    json: { tenantId, name: "Walked" },
  });
  workspaceId = workspace.body.id;
  const artifact = await server.request(`${G}/workspaces/${workspaceId}/artifacts`, {
    method: "POST",
    headers: bearer(owner.token),
    json: { name: "kept.txt", content: "aGk=" },
  });
  artifactId = artifact.body.id;
}, 60_000);
afterAll(async () => {
  await server?.close();
});

describe("docs/tenants.md route table", () => {
  it("has a call for every row and a row for every call", () => {
    expect(rows.map((row) => row.route).sort()).toEqual(Object.keys(CALLS).sort());
  });

  for (const row of rows) {
    it(`${row.route}: a non-member gets 404; each role as documented`, async () => {
      const outsiderCall = await CALLS[row.route]!();
      const denied = await server.request(G + outsiderCall.path, {
        method: outsiderCall.method,
        headers: bearer(outsider.token),
        json: outsiderCall.json,
      });
      expect(denied.status, JSON.stringify(denied.body)).toBe(404);
      expect(denied.body.error.code).toBe("NOT_FOUND");
      for (const role of ROLES) {
        const call = await CALLS[row.route]!();
        const res = await server.request(G + call.path, { method: call.method, headers: bearer(tokens[role]), json: call.json });
        if (row.allowed[role]) {
          // A missing named object is still a 404 for an allowed role (DELETE of an unknown server).
          const ok = res.status < 400 || (row.route.includes("/none") && res.status === 404);
          expect(ok, `${role} ${row.route}: ${res.status} ${JSON.stringify(res.body)}`).toBe(true);
        } else {
          expect(res.status, `${role} ${row.route}: ${JSON.stringify(res.body)}`).toBe(403);
          expect(res.body.error.code).toBe("FORBIDDEN");
          expect(res.body.error.message).toContain(role);
        }
      }
    }, 30_000);
  }
});
