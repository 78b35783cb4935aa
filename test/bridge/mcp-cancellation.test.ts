import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { VmAgent } from "../../bridge/vm/agent/client.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { serveEverything, type UpstreamMcp } from "../helpers/upstream.js";
import { connectVm, vmSocketUrl } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";

/**
 * Cancellation both ways: a client's notifications/cancelled stops the repo's VM agent's tool
 * (and an upstream server's call, test/bridge/mcp-per-server-and-federation.test.ts); a VM
 * that disconnects, or an upstream server that dies mid-call, ends the client's call at once.
 */
describe("MCP: cancellation both ways", () => {
  let server: TestServer;
  let token: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    // A long bound: every failure below must come from the event, not from the timeout.
    server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true", GATEWAY_RATE_LIMIT_RPM: "10000", GATEWAY_TIMEOUT_SECONDS: "60" });
    token = (await registerUser(server)).token;
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    await server.close();
  });

  async function connect(): Promise<Client> {
    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(token) } }),
    );
    clients.push(client);
    return client;
  }

  it("a client's cancellation aborts the VM agent's tool, which sends no answer", async () => {
    const seen: { started: number; aborted: string[]; finished: number } = { started: 0, aborted: [], finished: 0 };
    const agent = new VmAgent({
      url: vmSocketUrl(server.origin, "agent", { vmId: "vm-cancel" }),
      key: token,
      log: () => undefined,
      tools: [
        {
          name: "wait",
          description: "Waits until cancelled",
          category: "test",
          inputSchema: { type: "object" },
          run: (_args, signal) =>
            new Promise((_resolve, reject) => {
              seen.started += 1;
              signal.addEventListener("abort", () => {
                seen.aborted.push(String((signal.reason as Error).message));
                reject(signal.reason as Error);
              });
            }),
        },
        {
          name: "ping",
          description: "Answers at once",
          category: "test",
          inputSchema: { type: "object" },
          run: async () => ({ content: [{ type: "text", text: "pong" }] }),
        },
      ],
    });
    const running = agent.run();
    try {
      const client = await connect();
      await eventually(async () => (await client.listTools()).tools.some((tool) => tool.name === "vm__vm-cancel__wait"));
      const controller = new AbortController();
      const pending = client.callTool({ name: "vm__vm-cancel__wait", arguments: {} }, undefined, { signal: controller.signal });
      await eventually(() => seen.started === 1 && agent.running === 1);
      controller.abort("user pressed stop");
      await expect(pending).rejects.toThrow();
      await eventually(() => seen.aborted.length === 1 && agent.running === 0);
      expect(seen.aborted[0]).toBe("The caller went away");
      expect(server.bridge.vms.stats().inFlight).toBe(0);
      // The agent sent no answer for the cancelled request (a late one would be logged). A later
      // call's answer comes after it on the same socket, so once that is in, so would be a late one.
      expect(JSON.stringify((await client.callTool({ name: "vm__vm-cancel__ping", arguments: {} })).content)).toContain("pong");
      expect(server.logs().some((line) => line.event === "vm.reply_unknown_id")).toBe(false);
    } finally {
      agent.stop();
      await running;
    }
  });

  it("a VM that disconnects mid-call ends the client's call at once, as a tool error naming the VM", async () => {
    const vm = await connectVm(vmSocketUrl(server.origin, "agent", { vmId: "vm-drop" }), token, {
      "tools/call": () => new Promise(() => undefined),
    });
    await vm.register([{ name: "hang" }]);
    const client = await connect();
    await eventually(async () => (await client.listTools()).tools.some((tool) => tool.name === "vm__vm-drop__hang"));
    const pending = client.callTool({ name: "vm__vm-drop__hang", arguments: {} });
    await eventually(() => vm.frames.some((frame) => frame.includes('"tools/call"')));
    const dropped = Date.now();
    vm.ws.terminate();
    const result = (await pending) as CallToolResult;
    expect(Date.now() - dropped).toBeLessThan(5_000);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      error: { code: "BAD_GATEWAY", message: "VM vm-drop disconnected while the call was in flight" },
    });
  });

  it("an upstream server that dies mid-call ends the client's call at once, not at the timeout", async () => {
    const everything: UpstreamMcp = await serveEverything();
    let closed = false;
    try {
      expect(
        (
          await server.request("/gateway/v1/mcp/servers", {
            method: "POST",
            headers: bearer(token),
            json: { name: "mortal", url: everything.url },
          })
        ).body.health,
      ).toBe("healthy");
      const client = await connect();
      const before = everything.requestBodies.length;
      const pending = client.callTool({ name: "mortal__trigger-long-running-operation", arguments: { duration: 30, steps: 3 } });
      await eventually(() => everything.requestBodies.slice(before).some((message: any) => message?.method === "tools/call"));
      const died = Date.now();
      await everything.close();
      closed = true;
      const result = (await pending) as CallToolResult;
      expect(Date.now() - died).toBeLessThan(5_000);
      expect(result.isError).toBe(true);
      expect((result.structuredContent as { error: { code: string; message: string } }).error).toMatchObject({
        code: "BAD_GATEWAY",
        message: expect.stringContaining("MCP server mortal"),
      });
    } finally {
      if (!closed) await everything.close();
    }
  });
});
