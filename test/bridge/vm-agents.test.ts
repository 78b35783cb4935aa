import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { connectVm, openSocket, vmSocketUrl } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";

const SERVICE_KEY = "service-key-for-tests-0123456789";

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startTestServer({ PLATFORM_SERVICE_KEY: SERVICE_KEY, GATEWAY_MAX_PAYLOAD_BYTES: "4096" });
  token = (await registerUser(server)).token;
});
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

const url = (vmId: string, agentId = "agent-1") => vmSocketUrl(server.origin, agentId, { vmId });
const execute = (body: Record<string, unknown>, auth = token) =>
  server.request("/bridge/tools/execute", { method: "POST", headers: bearer(auth), json: body });

const echoTool = { name: "echo", description: "Echo", inputSchema: { type: "object", properties: { text: { type: "string" } } } };

describe("VM socket and /bridge/tools/execute", () => {
  it("registers tools, lists them in the catalog and runs one", async () => {
    const vm = await connectVm(url("vm-ok"), token, {
      "tools/call": ({ name, arguments: args }) => ({ content: [{ type: "text", text: `${name}:${args.text}` }] }),
    });
    expect(await vm.register([echoTool, { name: "hash", category: "crypto" }])).toEqual({ tools: ["echo", "hash"] });
    const tools = await server.bridge.catalog.list();
    expect(tools.filter((tool) => tool.source.kind === "vm").map((tool) => [tool.name, tool.category])).toEqual([
      ["vm__vm-ok__echo", "vm"],
      ["vm__vm-ok__hash", "crypto"],
    ]);
    const res = await execute({ tool_name: "echo", input: { text: "hi" }, vm_id: "vm-ok" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ content: [{ type: "text", text: "echo:hi" }] });
    // The catalog name works too, and the catalog can call it.
    expect((await execute({ tool_name: "vm__vm-ok__echo", input: { text: "x" }, vm_id: "vm-ok" })).body.content[0].text).toBe("echo:x");
    expect((await server.bridge.catalog.call("vm__vm-ok__echo", { text: "c" }, { timeoutMs: 2000 })).content[0]!.text).toBe("echo:c");
    await vm.close();
    await eventually(() => server.bridge.vms.stats().connected === 0);
    expect((await server.bridge.catalog.list()).some((tool) => tool.source.kind === "vm")).toBe(false);
  });

  it("fires catalog changes on connect, register and leave", async () => {
    let changes = 0;
    const off = server.bridge.catalog.onChange(() => changes++);
    const vm = await connectVm(url("vm-events"), token);
    await eventually(() => changes >= 1);
    await vm.register([echoTool]);
    expect(changes).toBeGreaterThanOrEqual(2);
    await vm.close();
    await eventually(() => changes >= 3);
    off();
  });

  it("multiplexes concurrent calls by id, answered out of order", async () => {
    const vm = await connectVm(url("vm-mux"), token, {
      "tools/call": async ({ arguments: args }) => {
        await new Promise((resolve) => setTimeout(resolve, (20 - args.n) * 3));
        return { content: [{ type: "text", text: String(args.n) }] };
      },
    });
    await vm.register([{ name: "slow" }]);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, n) => execute({ tool_name: "slow", input: { n }, vm_id: "vm-mux" })));
    expect(answers.map((res) => res.body.content[0].text)).toEqual(Array.from({ length: 20 }, (_, n) => String(n)));
    expect(server.bridge.vms.stats().inFlight).toBe(0);
    await vm.close();
  });

  it("answers 503 when no VM is connected, and for another user's VM", async () => {
    const res = await execute({ tool_name: "echo", input: {}, vm_id: "nobody-here" });
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ code: "UNAVAILABLE", details: { vmId: "nobody-here", reason: "vm_not_connected" } });
    const vm = await connectVm(url("vm-private"), token, { "tools/call": () => ({ content: [] }) });
    const other = (await registerUser(server)).token;
    const denied = await execute({ tool_name: "echo", input: {}, vm_id: "vm-private" }, other);
    expect(denied.status).toBe(503);
    expect(denied.body.error.message).toBe(res.body.error.message.replace("nobody-here", "vm-private"));
    // Internal services may call any VM with PLATFORM_SERVICE_KEY.
    expect((await execute({ tool_name: "echo", input: {}, vm_id: "vm-private" }, SERVICE_KEY)).status).toBe(200);
    await vm.close();
  });

  it("404s a tool the VM did not register, and validates the body", async () => {
    const vm = await connectVm(url("vm-404"), token, { "tools/call": () => ({ content: [] }) });
    await vm.register([echoTool]);
    const res = await execute({ tool_name: "nope", input: {}, vm_id: "vm-404" });
    expect(res.status).toBe(404);
    expect(res.body.error.details.tools).toEqual(["echo"]);
    expect((await execute({ tool_name: "echo", input: "text", vm_id: "vm-404" })).status).toBe(400);
    expect((await execute({ tool_name: "echo", vm_id: "vm-404", timeout: 0 })).status).toBe(400);
    await vm.close();
  });

  it("times out with 504 and drops the pending call", async () => {
    const seen: unknown[] = [];
    const vm = await connectVm(url("vm-slow"), token, { "tools/call": () => new Promise(() => undefined) });
    vm.ws.on("message", (data) => seen.push(JSON.parse(data.toString())));
    const started = Date.now();
    const res = await execute({ tool_name: "wait", input: {}, vm_id: "vm-slow", timeout: 1 });
    expect(res.status).toBe(504);
    expect(res.body.error.code).toBe("TIMEOUT");
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(server.bridge.vms.stats().inFlight).toBe(0);
    // The VM is told the call was cancelled; a late reply to that id is ignored and logged.
    await eventually(() => seen.some((m: any) => m.method === "notifications/cancelled"));
    const cancelled = seen.find((m: any) => m.method === "notifications/cancelled") as { params: { requestId: number } };
    vm.ws.send(JSON.stringify({ jsonrpc: "2.0", id: cancelled.params.requestId, result: { content: [] } }));
    await eventually(() => server.logs().some((line) => line.event === "vm.reply_unknown_id"));
    await vm.close();
  });

  it("passes on a VM's JSON-RPC error as 502 and an isError result as is", async () => {
    const vm = await connectVm(url("vm-err"), token, {
      "tools/call": ({ name }) => {
        if (name === "boom") throw new Error("disk on fire");
        return { content: [{ type: "text", text: "bad args" }], isError: true };
      },
    });
    const failed = await execute({ tool_name: "boom", input: {}, vm_id: "vm-err" });
    expect(failed.status).toBe(502);
    expect(failed.body.error.code).toBe("BAD_GATEWAY");
    expect(failed.body.error.message).toContain("disk on fire");
    expect(failed.body.error.details.vmError.message).toBe("disk on fire");
    const soft = await execute({ tool_name: "soft", input: {}, vm_id: "vm-err" });
    expect(soft.status).toBe(200);
    expect(soft.body).toEqual({ content: [{ type: "text", text: "bad args" }], isError: true });
    await vm.close();
  });

  it("answers malformed JSON with a parse error, a reply to an unknown id is ignored, the socket stays up", async () => {
    const vm = await connectVm(url("vm-garbage"), token, { "tools/call": () => ({ content: [{ type: "text", text: "still here" }] }) });
    vm.ws.send("{not json");
    await eventually(() => vm.frames.some((f) => JSON.parse(f).error?.code === -32700));
    vm.ws.send(JSON.stringify({ hello: "world" }));
    await eventually(() => vm.frames.some((f) => JSON.parse(f).error?.code === -32600));
    vm.ws.send(JSON.stringify({ jsonrpc: "2.0", id: 987654, result: { content: [] } }));
    await eventually(() => server.logs().some((line) => line.event === "vm.reply_unknown_id" && line.id === 987654));
    const bad = (await Promise.resolve(vm.rpc.request("tools/register", { tools: [{ name: "has space" }] })).catch(
      (e: Error) => e,
    )) as Error & { code: number };
    expect(bad.code).toBe(-32602);
    expect(vm.ws.readyState).toBe(WebSocket.OPEN);
    expect((await execute({ tool_name: "x", input: {}, vm_id: "vm-garbage" })).body.content[0].text).toBe("still here");
    await vm.close();
  });

  it("fails every in-flight call at once when the VM disconnects", async () => {
    let received = 0;
    const vm = await connectVm(url("vm-drop"), token, {
      "tools/call": () => {
        received++;
        return new Promise(() => undefined);
      },
    });
    const started = Date.now();
    const calls = Array.from({ length: 5 }, () => execute({ tool_name: "hang", input: {}, vm_id: "vm-drop", timeout: 30 }));
    await eventually(() => received === 5);
    vm.ws.terminate();
    const results = await Promise.all(calls);
    expect(Date.now() - started).toBeLessThan(5000);
    for (const res of results) {
      expect(res.status).toBe(502);
      expect(res.body.error.details.reason).toBe("vm_disconnected");
    }
    expect(server.bridge.vms.stats()).toMatchObject({ connected: 0, inFlight: 0 });
  });

  it("replaces the old socket on a reconnect with the same vmId; its calls fail", async () => {
    const first = await connectVm(url("vm-re"), token, { "tools/call": () => new Promise(() => undefined) });
    const pending = execute({ tool_name: "hang", input: {}, vm_id: "vm-re", timeout: 30 });
    await eventually(() => first.frames.some((f) => JSON.parse(f).method === "tools/call"));
    const second = await connectVm(url("vm-re"), token, { "tools/call": () => ({ content: [{ type: "text", text: "second" }] }) });
    expect(await first.closed).toEqual({ code: 4001, reason: "replaced by a newer connection" });
    const res = await pending;
    expect(res.status).toBe(502);
    expect(res.body.error.details.reason).toBe("vm_replaced");
    expect((await execute({ tool_name: "x", input: {}, vm_id: "vm-re" })).body.content[0].text).toBe("second");
    expect(server.bridge.vms.stats().connected).toBe(1);
    await second.close();
  });

  it("refuses upgrades without credentials (401), without vmId (400), and accepts the bearer subprotocol", async () => {
    const noAuth = await openSocket(url("vm-x")).catch((e) => e);
    expect(noAuth.status).toBe(401);
    expect(noAuth.headers["www-authenticate"]).toContain("Bearer");
    expect(JSON.parse(noAuth.body).error.code).toBe("UNAUTHORIZED");
    const badAuth = await openSocket(url("vm-x"), { headers: bearer("sk_not-a-real-key") }).catch((e) => e);
    expect(badAuth.status).toBe(401);
    const noVm = await openSocket(vmSocketUrl(server.origin, "a", {}), { headers: bearer(token) }).catch((e) => e);
    expect(noVm.status).toBe(400);
    const badTenant = await openSocket(vmSocketUrl(server.origin, "a", { vmId: "v", tenantId: "someone-else" }), {
      headers: bearer(token),
    }).catch((e) => e);
    expect(badTenant.status).toBe(403);
    const ws = await openSocket(url("vm-proto"), { protocols: ["vm-agent.v1", `bearer.${token}`] });
    expect(ws.protocol).toBe("vm-agent.v1");
    await eventually(() => server.bridge.vms.local("vm-proto"));
    ws.close();
    await eventually(() => !server.bridge.vms.local("vm-proto"));
  });

  it("closes a socket whose message exceeds GATEWAY_MAX_PAYLOAD_BYTES (1009)", async () => {
    const vm = await connectVm(url("vm-big"), token);
    vm.ws.send(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/register",
        params: { tools: [{ name: "a", description: "x".repeat(5000) }] },
      }),
    );
    expect((await vm.closed).code).toBe(1009);
    await eventually(() => !server.bridge.vms.local("vm-big"));
  });
});
