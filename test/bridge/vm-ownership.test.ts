import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { connectVm, openSocket, vmSocketUrl, type TestVm } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";

/**
 * Issue 9 item 2: a VM belongs to the tenant that first connected its vmId. A real `ws` VM for
 * user A, an attacker socket for user B presenting the same vmId: B is refused before the
 * upgrade (403) and A's socket stays up; every route taking a vmId answers B as for a missing VM.
 */

const SERVICE_KEY = "service-key-for-ownership-tests-0123";
const echo = { name: "echo", description: "Echo a text", inputSchema: { type: "object", properties: { text: { type: "string" } } } };
const answer = (label: string) => ({
  "tools/call": ({ arguments: args }: { arguments: { text?: string } }) => ({
    content: [{ type: "text", text: `${label}:${args.text ?? ""}` }],
  }),
});

/** A response without its request id, for "the same answer" checks. */
const same = (res: { status: number; body: any }) => {
  const body = JSON.parse(JSON.stringify(res.body ?? null));
  if (body?.error) delete body.error.requestId;
  return { status: res.status, body };
};

describe("VM ownership on one instance", () => {
  let server: TestServer;
  let a: { token: string; user: { tenantId: string } };
  let b: { token: string };
  const vms: TestVm[] = [];

  beforeAll(async () => {
    server = await startTestServer({ PLATFORM_SERVICE_KEY: SERVICE_KEY, GATEWAY_RATE_LIMIT_RPM: "100000" });
    a = await registerUser(server);
    b = await registerUser(server);
  });
  afterAll(async () => {
    await Promise.all(vms.map((vm) => vm.close()));
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  const url = (vmId: string) => vmSocketUrl(server.origin, "agent-1", { vmId });
  const post = (path: string, token: string, json: unknown) => server.request(path, { method: "POST", headers: bearer(token), json });

  /** Everything B can ask about vmId `owned-1`. */
  async function bProbes() {
    return {
      execute: same(await post("/bridge/tools/execute", b.token, { tool_name: "echo", input: { text: "x" }, vm_id: "owned-1" })),
      ask: same(await post("/gateway/v1/mcp/ask", b.token, { input: "echo a text", vmId: "owned-1", approve: true })),
      tool: same(await server.request("/gateway/v1/mcp/tools/vm__owned-1__echo", { headers: bearer(b.token) })),
      run: same(await post("/gateway/v1/mcp/tools/execute?tool=vm__owned-1__echo", b.token, { args: { text: "x" } })),
      steps: same(await post("/gateway/v1/mcp/execute", b.token, { steps: [{ tool: "vm__owned-1__echo", args: {} }] })),
      catalog: (await server.request("/gateway/v1/mcp/tools?category=vm", { headers: bearer(b.token) })).body.tools,
    };
  }

  it("refuses B's socket for A's vmId with 403, keeps A connected, and answers B as for a missing VM everywhere", async () => {
    const before = await bProbes();
    expect(before.execute).toMatchObject({
      status: 503,
      body: { error: { code: "UNAVAILABLE", details: { reason: "vm_not_connected" } } },
    });

    const vm = await connectVm(url("owned-1"), a.token, answer("A"));
    vms.push(vm);
    await vm.register([echo]);
    const attacker = await openSocket(url("owned-1"), { headers: bearer(b.token) }).catch((error) => error);
    expect(attacker.status).toBe(403);
    expect(JSON.parse(attacker.body).error).toMatchObject({ code: "FORBIDDEN", details: { vmId: "owned-1" } });
    // Through the subprotocol as well.
    const viaProtocol = await openSocket(url("owned-1"), { protocols: ["vm-agent.v1", `bearer.${b.token}`] }).catch((error) => error);
    expect(viaProtocol.status).toBe(403);

    // A's socket was never touched: same connection, still answering.
    expect(vm.ws.readyState).toBe(vm.ws.OPEN);
    expect(server.bridge.vms.local("owned-1")?.identity.tenantId).toBe(a.user.tenantId);
    expect(server.bridge.vms.stats().connected).toBe(1);

    expect(await bProbes()).toEqual(before);

    const mine = await post("/bridge/tools/execute", a.token, { tool_name: "echo", input: { text: "hi" }, vm_id: "owned-1" });
    expect(mine.body.content).toEqual([{ type: "text", text: "A:hi" }]);
    const service = await post("/bridge/tools/execute", SERVICE_KEY, { tool_name: "echo", input: { text: "svc" }, vm_id: "owned-1" });
    expect(service.body.content).toEqual([{ type: "text", text: "A:svc" }]);
  });

  it("lets A reconnect (the old socket is replaced), and keeps the vmId A's after A disconnects", async () => {
    const first = vms.pop()!;
    const second = await connectVm(url("owned-1"), a.token, answer("A2"));
    vms.push(second);
    expect(await first.closed).toEqual({ code: 4001, reason: "replaced by a newer connection" });
    await second.register([echo]);
    expect((await post("/bridge/tools/execute", a.token, { tool_name: "echo", input: {}, vm_id: "owned-1" })).body.content[0].text).toBe(
      "A2:",
    );

    await second.close();
    vms.pop();
    await eventually(() => !server.bridge.vms.local("owned-1"));
    const attacker = await openSocket(url("owned-1"), { headers: bearer(b.token) }).catch((error) => error);
    expect(attacker.status).toBe(403);
    expect(server.bridge.vms.local("owned-1")).toBeUndefined();
  });

  it("gives a user's tenant (not only the user who connected it) the VM through /bridge/tools/execute", async () => {
    // Connected by the platform service for A's tenant: A reaches it, B does not.
    const vm = await connectVm(
      vmSocketUrl(server.origin, "agent-1", { vmId: "svc-vm", tenantId: a.user.tenantId }),
      SERVICE_KEY,
      answer("svc"),
    );
    vms.push(vm);
    await vm.register([echo]);
    expect((await post("/bridge/tools/execute", a.token, { tool_name: "echo", input: {}, vm_id: "svc-vm" })).status).toBe(200);
    const denied = await post("/bridge/tools/execute", b.token, { tool_name: "echo", input: {}, vm_id: "svc-vm" });
    const missing = await post("/bridge/tools/execute", b.token, { tool_name: "echo", input: {}, vm_id: "no-such-vm" });
    expect(denied.status).toBe(503);
    expect(same(denied).body.error.message).toBe(same(missing).body.error.message.replace("no-such-vm", "svc-vm"));
  });
});

describe("VM ownership across two instances on one Redis", () => {
  const prefix = uniqueRedisPrefix();
  let one: TestServer;
  let two: TestServer;
  const vms: TestVm[] = [];

  beforeAll(async () => {
    const env = { STORAGE: "redis", REDIS_PREFIX: prefix, GATEWAY_RATE_LIMIT_RPM: "100000" };
    [one, two] = await Promise.all([startTestServer(env), startTestServer(env)]);
  });
  afterAll(async () => {
    await Promise.all(vms.map((vm) => vm.close()));
    for (const server of [one, two]) {
      expect(server.loggedErrors()).toEqual([]);
      await server.close();
    }
    await dropRedisPrefix(prefix);
  });

  it("refuses B on the other instance, and A's reconnect there replaces A's socket here", async () => {
    const a = await registerUser(one);
    const b = await registerUser(two);
    const vm = await connectVm(vmSocketUrl(one.origin, "agent-1", { vmId: "roaming" }), a.token, answer("one"));
    vms.push(vm);
    await vm.register([echo]);

    const attacker = await openSocket(vmSocketUrl(two.origin, "agent-1", { vmId: "roaming" }), { headers: bearer(b.token) }).catch(
      (error) => error,
    );
    expect(attacker.status).toBe(403);
    expect(vm.ws.readyState).toBe(vm.ws.OPEN);
    const viaTwo = await two.request("/bridge/tools/execute", {
      method: "POST",
      headers: bearer(a.token),
      json: { tool_name: "echo", input: { text: "x" }, vm_id: "roaming" },
    });
    expect(viaTwo.body.content).toEqual([{ type: "text", text: "one:x" }]);
    const bViaTwo = await two.request("/bridge/tools/execute", {
      method: "POST",
      headers: bearer(b.token),
      json: { tool_name: "echo", input: {}, vm_id: "roaming" },
    });
    expect(bViaTwo.status).toBe(503);

    const moved = await connectVm(vmSocketUrl(two.origin, "agent-1", { vmId: "roaming" }), a.token, answer("two"));
    vms.push(moved);
    expect(await vm.closed).toEqual({ code: 4001, reason: "replaced by a newer connection" });
    await moved.register([echo]);
    await eventually(async () => {
      const res = await one.request("/bridge/tools/execute", {
        method: "POST",
        headers: bearer(a.token),
        json: { tool_name: "echo", input: {}, vm_id: "roaming" },
      });
      return res.body?.content?.[0]?.text === "two:";
    });
  });
});
