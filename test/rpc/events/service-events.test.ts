import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { eventually } from "../../helpers/eventually.js";

let server: TestServer;
let user: Awaited<ReturnType<typeof registerUser>>;

beforeAll(async () => {
  server = await startTestServer();
  user = await registerUser(server);
});
afterAll(async () => {
  await server.close();
});

const call = (method: string, path: string, json?: unknown) => server.request(`/gateway/v1${path}`, { method, headers: bearer(user.token), ...(json !== undefined ? { json } : {}) });
const types = async () => ((await call("GET", "/events?limit=200")).body.data as { type: string; payload: Record<string, unknown> }[]);

describe("the service's own events (docs/events.md catalog)", () => {
  it("publishes key, agent and tenant events under the tenant", async () => {
    const key = (await call("POST", "/auth/keys", { name: "k" })).body;
    await call("DELETE", `/auth/keys/${key.id}`);
    const agent = (await call("POST", "/agents", { name: "helper", model: "echo-1" })).body;
    await call("POST", `/agents/${agent.id}/invoke`, { input: "hi" });
    await call("POST", `/agents/${agent.id}/deploy`);
    await call("DELETE", `/agents/${agent.id}`);
    await call("PATCH", `/tenants/${user.user.tenantId}`, { name: "Renamed" });
    const wanted = ["key.created", "key.revoked", "agent.created", "agent.invoked", "agent.completed", "agent.deployed", "agent.deleted", "tenant.updated"];
    const seen = await eventually(async () => {
      const list = await types();
      return wanted.every((type) => list.some((event) => event.type === type)) ? list : undefined;
    });
    expect(seen!.find((event) => event.type === "key.created")!.payload).toMatchObject({ keyId: key.id, kind: "gateway" });
    expect(seen!.find((event) => event.type === "agent.created")!.payload).toMatchObject({ agentId: agent.id });
    expect(JSON.stringify(seen!)).not.toContain(key.key);
  });

  it("never fails the operation when publishing fails", async () => {
    server.allowLoggedErrors((line) => line.msg === "event not published");
    const spy = vi.spyOn(server.services.events, "publish").mockRejectedValue(new Error("bus down"));
    try {
      const res = await call("POST", "/auth/keys", { name: "still-works" });
      expect(res.status).toBe(201);
      await eventually(() => server.logs().some((line) => line.msg === "event not published" && line.type === "key.created"));
    } finally {
      spy.mockRestore();
    }
  });
});
