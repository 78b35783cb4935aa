import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { serveMcp, type UpstreamMcp } from "../helpers/upstream.js";

/** An upstream server whose `echo` answers, `refuse` answers a JSON-RPC error, and `broken` a result that is no CallToolResult. */
function upstreamServer(): Promise<UpstreamMcp> {
  return serveMcp(() => {
    const server = new Server({ name: "paths", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: ["echo", "refuse"].map((name) => ({
        name,
        description: name,
        inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const { text } = request.params.arguments as { text: string };
      if (request.params.name === "refuse") throw new McpError(ErrorCode.InvalidParams, `no ${text}`);
      return { content: [{ type: "text", text: `echo ${text}` }], structuredContent: { text } };
    });
    return server;
  });
}

/**
 * A single plain `tools/call` is answered by the endpoint itself and sent upstream as one
 * JSON-RPC POST (bridge/mcp/endpoint.ts, bridge/upstream/connection.ts); a batch of one goes
 * through the SDK's server transport. Both must give the same answers.
 */
describe("MCP tools/call: the direct answer and the SDK path agree", () => {
  let server: TestServer;
  let upstream: UpstreamMcp;
  let alice: string;
  let bob: string;
  let session: { client: Client; headers: Record<string, string> };

  beforeAll(async () => {
    upstream = await upstreamServer();
    server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true", GATEWAY_RATE_LIMIT_RPM: "10000" });
    alice = (await registerUser(server)).token;
    bob = (await registerUser(server)).token;
    const registered = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: bearer(alice),
      json: { name: "paths", url: upstream.url },
    });
    expect(registered.status).toBe(201);
    const client = new Client({ name: "test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(alice) } });
    await client.connect(transport);
    session = {
      client,
      headers: { "mcp-session-id": transport.sessionId!, "mcp-protocol-version": transport.protocolVersion ?? "2025-11-25" },
    };
  });
  afterAll(async () => {
    await session.client.close().catch(() => undefined);
    await server.close();
    await upstream.close();
  });

  const post = async (token: string, body: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: { ...bearer(token), "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("application/json");
    expect(response.headers.get("x-request-id")).toBeTruthy();
    return response.json() as Promise<any>;
  };
  /** A batch of one through the SDK's transport (which answers it with the single reply, not an array). */
  const viaSdk = async (token: string, body: unknown, headers: Record<string, string> = {}) => {
    const answer = await post(token, [body], headers);
    return Array.isArray(answer) ? answer[0] : answer;
  };
  const call = (id: number, name: string, args: unknown) => ({
    jsonrpc: "2.0",
    id,
    method: "tools/call",
    params: { name, arguments: args },
  });

  const cases: [string, string, unknown][] = [
    ["an upstream tool's result", "paths__echo", { text: "hi" }],
    ["an upstream JSON-RPC error, as a tool error", "paths__refuse", { text: "way" }],
    ["arguments that fail the schema, as a tool error", "paths__echo", { text: 5 }],
    ["an unknown tool, as -32602", "paths__missing", {}],
    ["a built-in tool", "calculator", { expression: "6*7" }],
  ];

  for (const [what, name, args] of cases) {
    it(`gives the same answer for ${what}, stateless and in a session`, async () => {
      for (const headers of [{}, session.headers]) {
        const direct = await post(alice, call(7, name, args), headers);
        expect(direct).toEqual(await viaSdk(alice, call(7, name, args), headers));
        expect(direct.id).toBe(7);
      }
    });
  }

  it("reaches the upstream server with the gateway's session and answers what it said", async () => {
    const before = upstream.requestBodies.length;
    const answer = await post(alice, call(1, "paths__echo", { text: "there" }), session.headers);
    expect(answer.result).toEqual({ content: [{ type: "text", text: "echo there" }], structuredContent: { text: "there" } });
    const sent = upstream.requestBodies.slice(before) as { method?: string; params?: { name?: string } }[];
    expect(sent.filter((message) => message.method === "tools/call").map((message) => message.params?.name)).toEqual(["echo"]);
    const headers = upstream.requestHeaders.at(-1)!;
    expect(headers["mcp-session-id"]).toBeTruthy();
    expect(headers["content-length"]).toBeDefined();
  });

  it("refuses another tenant's upstream tool like a missing one, on both paths", async () => {
    const direct = await post(bob, call(3, "paths__echo", { text: "x" }));
    expect(direct).toEqual(await viaSdk(bob, call(3, "paths__echo", { text: "x" })));
    expect(direct.error.code).toBe(ErrorCode.InvalidParams);
    expect(direct.error.message).toContain("Unknown tool");
  });

  it("leaves malformed calls to the SDK's checks", async () => {
    const malformed = { jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: 42 } };
    const answer = await post(alice, malformed);
    expect(answer.error).toBeDefined();
    expect(answer).toEqual(await viaSdk(alice, malformed));
  });
});
