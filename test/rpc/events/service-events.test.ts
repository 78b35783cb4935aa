import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { eventually } from "../../helpers/eventually.js";
import { openSocket, vmSocketUrl } from "../../helpers/vm.js";

let server: TestServer;
let user: Awaited<ReturnType<typeof registerUser>>;

beforeAll(async () => {
  server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true", GATEWAY_MAX_RETRIES: "0" });
  user = await registerUser(server);
});
afterAll(async () => {
  await server.close();
});

const call = (method: string, path: string, json?: unknown) =>
  server.request(`/gateway/v1${path}`, { method, headers: bearer(user.token), ...(json !== undefined ? { json } : {}) });
const types = async () => (await call("GET", "/events?limit=200")).body.data as { type: string; payload: Record<string, unknown> }[];

describe("the service's own events (docs/events.md catalog)", () => {
  it("publishes key, agent and tenant events under the tenant", async () => {
    const key = (await call("POST", "/auth/keys", { name: "k" })).body;
    await call("DELETE", `/auth/keys/${key.id}`);
    const agent = (await call("POST", "/agents", { name: "helper", model: "echo-1" })).body;
    await call("POST", `/agents/${agent.id}/invoke`, { input: "hi" });
    await call("POST", `/agents/${agent.id}/deploy`);
    await call("DELETE", `/agents/${agent.id}`);
    await call("PATCH", `/tenants/${user.user.tenantId}`, { name: "Renamed" });
    const wanted = [
      "key.created",
      "key.revoked",
      "agent.created",
      "agent.invoked",
      "agent.completed",
      "agent.deployed",
      "agent.deleted",
      "tenant.updated",
    ];
    const seen = await eventually(async () => {
      const list = await types();
      return wanted.every((type) => list.some((event) => event.type === type)) ? list : undefined;
    });
    expect(seen!.find((event) => event.type === "key.created")!.payload).toMatchObject({ keyId: key.id, kind: "gateway" });
    expect(seen!.find((event) => event.type === "agent.created")!.payload).toMatchObject({ agentId: agent.id });
    expect(JSON.stringify(seen!)).not.toContain(key.key);
  });

  it("publishes what the tool bridge observes: a VM leaving, an upstream server's health, member and workspace changes", async () => {
    const vm = await openSocket(vmSocketUrl(server.origin, "agent-1", { vmId: "events-vm" }), { headers: bearer(user.token) });
    vm.close();
    // A server on a closed loopback port: unhealthy at once.
    const refused = await call("POST", "/mcp/servers", { name: "gone", url: "http://127.0.0.1:9/mcp" });
    expect([201, 502]).toContain(refused.status);
    const other = await registerUser(server);
    await call("POST", `/tenants/${user.user.tenantId}/members`, { userId: other.user.id, role: "viewer" }).then(async (added) => {
      if (added.status === 201) await call("DELETE", `/tenants/${user.user.tenantId}/members/${other.user.id}`);
    });
    const workspace = await call("POST", "/workspaces", { tenantId: user.user.tenantId, name: "events-ws" });
    await call("PATCH", `/workspaces/${workspace.body.id}?status=archived`);
    const seen = await eventually(async () => {
      const list = await types();
      return ["vm.disconnected", "mcp.server.health_changed", "workspace.status_changed"].every((type) =>
        list.some((event) => event.type === type),
      )
        ? list
        : undefined;
    });
    expect(seen!.find((event) => event.type === "vm.disconnected")!.payload).toMatchObject({ vmId: "events-vm", agentId: "agent-1" });
    expect(seen!.find((event) => event.type === "mcp.server.health_changed")!.payload).toMatchObject({ name: "gone", health: "unhealthy" });
    expect(seen!.find((event) => event.type === "workspace.status_changed")!.payload).toMatchObject({
      workspaceId: workspace.body.id,
      status: "archived",
    });
  });

  it("never fails the operation when publishing fails", async () => {
    server.allowLoggedErrors((line) => line.msg === "event not published");
    const spy = vi.spyOn(server.composition.ports.eventLog, "publish").mockRejectedValue(new Error("bus down"));
    try {
      const res = await call("POST", "/auth/keys", { name: "still-works" });
      expect(res.status).toBe(201);
      await eventually(() => server.logs().some((line) => line.msg === "event not published" && line.type === "key.created"));
    } finally {
      spy.mockRestore();
    }
  });
});
