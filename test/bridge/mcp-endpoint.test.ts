import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { mcpSessionsOf } from "../../bridge/mcp/endpoint.js";
import { registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { connectVm, vmSocketUrl, type TestVm } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";
import { watchListChanged } from "../helpers/mcp.js";

let server: TestServer;
let token: string;
const clients: Client[] = [];
const vms: TestVm[] = [];

beforeAll(async () => {
  server = await startTestServer({ GATEWAY_RATE_LIMIT_RPM: "10000", GATEWAY_CORS_ORIGINS: "https://app.example.com" });
  token = (await registerUser(server)).token;
});
afterAll(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  await Promise.all(vms.map((vm) => vm.close()));
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

async function connect(path = "/bridge/mcp/", credential = token): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: "test-client", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(server.url(path)), {
    requestInit: { headers: { authorization: `Bearer ${credential}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

const MCP_ACCEPT = { accept: "application/json, text/event-stream", "content-type": "application/json" };
const initializeBody = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

async function rawInitialize(headers: Record<string, string> = {}) {
  return fetch(server.url("/bridge/mcp/mcp/"), {
    method: "POST",
    headers: { ...MCP_ACCEPT, authorization: `Bearer ${token}`, ...headers },
    body: JSON.stringify(initializeBody),
  });
}

describe("MCP endpoint with the SDK client", () => {
  it("initializes at every documented path, with protocol 2025-11-25", async () => {
    for (const path of ["/bridge/mcp/mcp/", "/bridge/mcp/mcp", "/bridge/mcp/", "/bridge/mcp"]) {
      const { client, transport } = await connect(path);
      expect(client.getServerVersion()?.name).toBe("chat-agent-tool-gateway");
      expect(client.getServerCapabilities()?.tools?.listChanged).toBe(true);
      // Sealed claims (bridge/mcp/session-id.ts): visible ASCII, as Streamable HTTP requires.
      expect(transport.sessionId).toMatch(/^mcp1\.[A-Za-z0-9_-]+$/);
      expect(transport.protocolVersion).toBe("2025-11-25");
    }
  });

  it("lists the built-in tools and calls the calculator", async () => {
    const { client } = await connect();
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name);
    expect(names).toEqual(expect.arrayContaining(["calculator", "current_time"]));
    const calculator = tools.find((tool) => tool.name === "calculator")!;
    expect(calculator.inputSchema.type).toBe("object");

    const result = (await client.callTool({ name: "calculator", arguments: { expression: "6 * 7" } })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(JSON.stringify(result.content)).toContain("42");

    // Answered calls leave nothing behind in the session (SDK 1.32 JSON replies leaked, bridge/mcp/_json-transport.ts).
    await Promise.all(Array.from({ length: 20 }, (_, i) => client.callTool({ name: "calculator", arguments: { expression: `${i} + 1` } })));
    const sessions = mcpSessionsOf(server.dispatcher.ports)!;
    expect(sessions.size).toBeGreaterThan(0);
    expect(sessions.all().map((session) => session.transport.heldReplies)).toEqual(sessions.all().map(() => 0));
  });

  it("answers bad arguments with a tool error and an unknown tool with a JSON-RPC error", async () => {
    const { client } = await connect();
    const bad = (await client.callTool({ name: "calculator", arguments: { expression: 42 } })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect((bad.content[0] as { text: string }).text).toMatch(/Invalid arguments for calculator: expression/);
    expect(bad.structuredContent).toMatchObject({ error: { code: "VALIDATION_FAILED" } });

    const unknown = await client.callTool({ name: "no_such_tool", arguments: {} }).catch((error) => error);
    expect(unknown).toBeInstanceOf(McpError);
    expect((unknown as McpError).code).toBe(-32602);
    expect((unknown as McpError).message).toContain("Unknown tool: no_such_tool");
  });

  it("sends tools/list_changed when a VM connects, then lists and calls its tool", async () => {
    const { client } = await connect();
    const listChanged = await watchListChanged(client, server.bridge.catalog);
    const seen = listChanged.count();

    const vm = await connectVm(vmSocketUrl(server.origin, "agent-1", { vmId: "mcp-vm" }), token, {
      "tools/call": ({ name, arguments: args }) => ({ content: [{ type: "text", text: `${name} says ${args.text}` }] }),
    });
    vms.push(vm);
    await vm.register([
      {
        name: "shout",
        description: "Shouts",
        inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      },
    ]);
    await eventually(() => listChanged.count() > seen);

    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toContain("vm__mcp-vm__shout");
    const result = (await client.callTool({ name: "vm__mcp-vm__shout", arguments: { text: "hi" } })) as CallToolResult;
    expect(result.content).toEqual([{ type: "text", text: "shout says hi" }]);

    // Schema checked before the VM is asked.
    const bad = (await client.callTool({ name: "vm__mcp-vm__shout", arguments: {} })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect(vm.frames.filter((frame) => JSON.parse(frame).method === "tools/call")).toHaveLength(1);

    // The VM leaving is a change too.
    const afterConnect = listChanged.count();
    await vm.close();
    await eventually(() => listChanged.count() > afterConnect);
    expect((await client.listTools()).tools.map((tool) => tool.name)).not.toContain("vm__mcp-vm__shout");
  });

  it("ends a session on DELETE; the session id then answers 404", async () => {
    const { transport } = await connect();
    const sessionId = transport.sessionId!;
    await transport.terminateSession();
    const res = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: {
        ...MCP_ACCEPT,
        authorization: `Bearer ${token}`,
        "mcp-session-id": sessionId,
        "mcp-protocol-version": LATEST_PROTOCOL_VERSION,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32004 } });
  });
});

describe("MCP endpoint over raw HTTP", () => {
  it("answers 401 with WWW-Authenticate pointing at the protected-resource metadata", async () => {
    for (const authorization of [undefined, "Bearer sk_notakey", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.bad"]) {
      const res = await fetch(server.url("/bridge/mcp/"), {
        method: "POST",
        headers: { ...MCP_ACCEPT, ...(authorization ? { authorization } : {}) },
        body: JSON.stringify(initializeBody),
      });
      expect(res.status).toBe(401);
      const header = res.headers.get("www-authenticate")!;
      expect(header).toMatch(/^Bearer /);
      expect(header).toContain(`resource_metadata="${server.origin}/.well-known/oauth-protected-resource/bridge/mcp"`);
    }
    const metadata = await server.request("/.well-known/oauth-protected-resource/bridge/mcp");
    expect(metadata.status).toBe(200);
    expect(metadata.body).toMatchObject({ resource: `${server.origin}/bridge/mcp`, bearer_methods_supported: ["header"] });
  });

  it("refuses an Origin outside GATEWAY_CORS_ORIGINS with 403 and accepts a listed one", async () => {
    const refused = await rawInitialize({ origin: "https://evil.example.net" });
    expect(refused.status).toBe(403);
    const allowed = await rawInitialize({ origin: "https://app.example.com" });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://app.example.com");
  });

  it("answers 400 to an unsupported MCP-Protocol-Version", async () => {
    const init = await rawInitialize();
    const sessionId = init.headers.get("mcp-session-id")!;
    expect(sessionId).toBeTruthy();
    expect(init.headers.get("content-type")).toContain("application/json");
    expect(((await init.json()) as any).result.protocolVersion).toBe(LATEST_PROTOCOL_VERSION);
    const res = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: { ...MCP_ACCEPT, authorization: `Bearer ${token}`, "mcp-session-id": sessionId, "mcp-protocol-version": "1999-01-01" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.message).toContain("Unsupported MCP-Protocol-Version 1999-01-01");
    // An older revision the SDK speaks is fine.
    const older = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: { ...MCP_ACCEPT, authorization: `Bearer ${token}`, "mcp-session-id": sessionId, "mcp-protocol-version": "2025-03-26" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" }),
    });
    expect(older.status).toBe(200);
  });

  it("binds a session to its user: another user gets 404 for it", async () => {
    const init = await rawInitialize();
    const sessionId = init.headers.get("mcp-session-id")!;
    const other = await registerUser(server);
    const res = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: { ...MCP_ACCEPT, authorization: `Bearer ${other.token}`, "mcp-session-id": sessionId },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    expect(res.status).toBe(404);
    const del = await fetch(server.url("/bridge/mcp/"), {
      method: "DELETE",
      headers: { authorization: `Bearer ${other.token}`, "mcp-session-id": sessionId },
    });
    expect(del.status).toBe(404);
    const own = await fetch(server.url("/bridge/mcp/"), {
      method: "DELETE",
      headers: { authorization: `Bearer ${token}`, "mcp-session-id": sessionId },
    });
    expect(own.status).toBe(200);
  });

  it("needs a session id for a GET stream (a POST without one is answered statelessly), and refuses bodies over the payload limit", async () => {
    const res = await fetch(server.url("/bridge/mcp/"), { headers: { accept: "text/event-stream", authorization: `Bearer ${token}` } });
    expect(res.status).toBe(400);
    const big = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: { ...MCP_ACCEPT, authorization: `Bearer ${token}` },
      body: JSON.stringify({ ...initializeBody, padding: "x".repeat(1_100_000) }),
    });
    expect(big.status).toBe(413);
  });
});
