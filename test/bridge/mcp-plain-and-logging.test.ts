import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request as httpRequest } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  LoggingMessageNotificationSchema,
  type LoggingMessageNotification,
} from "@modelcontextprotocol/sdk/types.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { serveMcp, type UpstreamMcp } from "../helpers/upstream.js";
import { eventually } from "../helpers/eventually.js";

/** An upstream MCP server with logging: its `announce` tool logs the given text at the given level. */
function loggingUpstream(): Promise<UpstreamMcp> {
  return serveMcp(() => {
    const server = new Server({ name: "logger", version: "1.0.0" }, { capabilities: { tools: {}, logging: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [
        {
          name: "announce",
          description: "Logs a line",
          inputSchema: { type: "object", properties: { text: { type: "string" }, level: { type: "string" } } },
        },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const { text, level } = (request.params.arguments ?? {}) as { text: string; level?: "info" | "error" };
      await server.sendLoggingMessage({ level: level ?? "info", logger: "announcer", data: text });
      return { content: [{ type: "text", text: "announced" }] };
    });
    return server;
  });
}

async function mcpClient(server: TestServer, token: string, received: LoggingMessageNotification["params"][]): Promise<Client> {
  const client = new Client({ name: "test", version: "1.0.0" });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void received.push(notification.params));
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(token) } }));
  return client;
}

const post = (server: TestServer, token: string, body: unknown, accept = "application/json") =>
  fetch(server.url("/bridge/mcp/"), {
    method: "POST",
    headers: { ...bearer(token), "content-type": "application/json", accept },
    body: JSON.stringify(body),
  });

describe("MCP endpoint: plain JSON-RPC, logging, Host", () => {
  let server: TestServer;
  let upstream: UpstreamMcp;
  let alice: string;
  let bob: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    upstream = await loggingUpstream();
    server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true", GATEWAY_RATE_LIMIT_RPM: "10000" });
    alice = (await registerUser(server)).token;
    bob = (await registerUser(server)).token;
    const registered = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: bearer(alice),
      json: { name: "loud", url: upstream.url },
    });
    expect(registered.status).toBe(201);
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    await server.close();
    await upstream.close();
  });

  it("answers a plain tools/list and a batch without a session, with Accept: application/json alone", async () => {
    const list = await post(server, alice, { jsonrpc: "2.0", id: 1, method: "tools/list" });
    expect(list.status).toBe(200);
    expect(list.headers.get("content-type")).toContain("application/json");
    expect(list.headers.get("mcp-session-id")).toBeNull();
    const names = ((await list.json()) as any).result.tools.map((tool: { name: string }) => tool.name);
    expect(names).toEqual(expect.arrayContaining(["calculator", "loud__announce"]));

    const batch = await post(server, alice, [
      { jsonrpc: "2.0", id: "a", method: "tools/call", params: { name: "calculator", arguments: { expression: "6*7" } } },
      { jsonrpc: "2.0", id: "b", method: "ping" },
    ]);
    expect(batch.status).toBe(200);
    const replies = (await batch.json()) as any[];
    expect(replies.find((reply: { id: string }) => reply.id === "a").result.structuredContent.result).toBe(42);
    expect(replies.find((reply: { id: string }) => reply.id === "b").result).toEqual({});
  });

  it("holds plain requests to the same auth and tenant rules as sessions", async () => {
    expect((await post(server, "not-a-token", { jsonrpc: "2.0", id: 1, method: "tools/list" })).status).toBe(401);
    const bobs = await post(server, bob, { jsonrpc: "2.0", id: 1, method: "tools/list" });
    const names = ((await bobs.json()) as any).result.tools.map((tool: { name: string }) => tool.name);
    expect(names).not.toContain("loud__announce");
    const call = await post(server, bob, {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "loud__announce", arguments: { text: "x" } },
    });
    const missing = await post(server, bob, {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "nobody__announce", arguments: { text: "x" } },
    });
    expect(((await call.json()) as any).error).toEqual({ ...((await missing.json()) as any).error, message: expect.any(String) });
  });

  it("relays an upstream server's log messages to its tenant's sessions only, filtered by logging/setLevel", async () => {
    const aliceLogs: LoggingMessageNotification["params"][] = [];
    const bobLogs: LoggingMessageNotification["params"][] = [];
    const aliceClient = await mcpClient(server, alice, aliceLogs);
    const bobClient = await mcpClient(server, bob, bobLogs);
    clients.push(aliceClient, bobClient);
    expect(aliceClient.getServerCapabilities()?.logging).toEqual({});
    await aliceClient.setLoggingLevel("info");
    await bobClient.setLoggingLevel("debug");

    // The GET stream opens after initialize; once the gateway's own message for a call arrives it is open.
    await eventually(async () => {
      await aliceClient.callTool({ name: "loud__announce", arguments: { text: "hello tenant" } });
      return aliceLogs.some((entry) => entry.logger === "loud/announcer" && entry.data === "hello tenant");
    });
    expect(aliceLogs.find((entry) => entry.data === "hello tenant")).toMatchObject({ level: "info", logger: "loud/announcer" });
    // At level info, the gateway's debug notes are filtered out; at error, info is too.
    expect(aliceLogs.some((entry) => entry.logger === "gateway" && entry.level === "debug")).toBe(false);
    await aliceClient.setLoggingLevel("error");
    await aliceClient.callTool({ name: "loud__announce", arguments: { text: "quiet please", level: "info" } });
    await aliceClient.callTool({ name: "loud__announce", arguments: { text: "loud error", level: "error" } });
    await eventually(() => aliceLogs.some((entry) => entry.data === "loud error"));
    expect(aliceLogs.some((entry) => entry.data === "quiet please")).toBe(false);

    // Bob's session sees his own gateway notes but nothing of Alice's server.
    await bobClient.callTool({ name: "calculator", arguments: { expression: "1+1" } });
    await eventually(() => bobLogs.some((entry) => entry.logger === "gateway"));
    expect(bobLogs.some((entry) => String(entry.logger).startsWith("loud"))).toBe(false);
  });

  it("refuses a foreign Host while bound to loopback (DNS rebinding), on every surface", async () => {
    const withHost = (path: string, host: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const url = new URL(server.url(path));
        const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, headers: { host, ...bearer(alice) } }, (res) => {
          let body = "";
          res.on("data", (chunk) => (body += chunk));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on("error", reject);
        req.end();
      });
    for (const path of ["/bridge/mcp/", "/gateway/v1/auth/me", "/api/v1/models", "/rpc"]) {
      const refused = await withHost(path, "evil.example:80");
      expect(refused.status, path).toBe(403);
      expect(refused.body, path).toContain("evil.example");
    }
    for (const host of ["localhost:1", "127.0.0.1", "[::1]:8080"])
      expect((await withHost("/gateway/v1/auth/me", host)).status, host).toBe(200);
  });
});
