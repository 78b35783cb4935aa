import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { connectVm, vmSocketUrl, type TestVm } from "../helpers/vm.js";

/*
 * A tool call resolves its name once (entry and source) and passes the resolution along:
 * one listing of the catalog's sources per call, and the VM source reaches the VM from the
 * resolved entry without looking it up again (bridge/catalog.ts resolve/run).
 */
describe("a tool call resolves its name once", () => {
  let server: TestServer;
  let alice: string;
  let bob: string;
  let vm: TestVm;
  let client: Client;

  beforeAll(async () => {
    server = await startTestServer({ GATEWAY_RATE_LIMIT_RPM: "10000" });
    alice = (await registerUser(server)).token;
    bob = (await registerUser(server)).token;
    vm = await connectVm(vmSocketUrl(server.origin, "agent-1", { vmId: "vm-once" }), alice, {
      "tools/call": ({ name, arguments: args }) => ({ content: [{ type: "text", text: `${name}:${args.text}` }] }),
    });
    await vm.register([{ name: "echo", description: "Echo", inputSchema: { type: "object", properties: { text: { type: "string" } } } }]);
    client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(alice) } }),
    );
  });
  afterAll(async () => {
    await client.close().catch(() => undefined);
    await vm.close();
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  /** Spies on the catalog's resolution and on the VM directory's listing and lookup during `work`. */
  async function counted<T>(work: () => Promise<T>) {
    const resolve = vi.spyOn(server.bridge.catalog, "resolve");
    const list = vi.spyOn(server.bridge.vms, "list");
    const find = vi.spyOn(server.bridge.vms, "find");
    try {
      const result = await work();
      return { result, resolutions: resolve.mock.calls.length, listings: list.mock.calls.length, lookups: find.mock.calls.length };
    } finally {
      resolve.mockRestore();
      list.mockRestore();
      find.mockRestore();
    }
  }

  it("an MCP tools/call to a VM lists the VMs once and looks nothing up again", async () => {
    const { result, resolutions, listings, lookups } = await counted(() =>
      client.callTool({ name: "vm__vm-once__echo", arguments: { text: "hi" } }),
    );
    expect(result.content).toEqual([{ type: "text", text: "echo:hi" }]);
    expect({ resolutions, listings, lookups }).toEqual({ resolutions: 1, listings: 1, lookups: 0 });
  });

  it("a REST call of a VM tool resolves once too", async () => {
    const { result, resolutions, listings, lookups } = await counted(() =>
      server.request("/gateway/v1/mcp/tools/execute?tool=vm__vm-once__echo", {
        method: "POST",
        headers: bearer(alice),
        json: { args: { text: "r" } },
      }),
    );
    expect(result.status).toBe(200);
    expect(result.body).toEqual({ content: [{ type: "text", text: "echo:r" }] });
    expect({ resolutions, listings, lookups }).toEqual({ resolutions: 1, listings: 1, lookups: 0 });
  });

  it("another tenant's VM tool gives the same answer as an unknown one, after one resolution", async () => {
    const asBob = (name: string) =>
      server.request(`/gateway/v1/mcp/tools/execute?tool=${name}`, { method: "POST", headers: bearer(bob), json: { args: { text: "x" } } });
    const theirs = await counted(() => asBob("vm__vm-once__echo"));
    const missing = await asBob("vm__vm-none__echo");
    expect(theirs.result.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(theirs.result.body.error.message).toBe(missing.body.error.message.replace("vm-none", "vm-once"));
    expect(theirs.resolutions).toBe(1);
  });

  it("a resolution made in one tenant's scope does not run in another's", async () => {
    const catalog = server.bridge.catalog;
    const owner = (await catalog.list()).find((tool) => tool.name === "vm__vm-once__echo")!.owner!;
    const resolved = await catalog.resolve("vm__vm-once__echo", { tenantId: owner });
    expect(resolved?.tool.source).toMatchObject({ kind: "vm", vmId: "vm-once", tool: "echo" });
    expect((await catalog.run(resolved!, { text: "own" }, { timeoutMs: 2000, tenantId: owner })).content[0]!.text).toBe("echo:own");
    const other = `${owner}-other`;
    await expect(catalog.run(resolved!, { text: "x" }, { timeoutMs: 2000, tenantId: other })).rejects.toMatchObject({ code: "NOT_FOUND" });
  });
});
