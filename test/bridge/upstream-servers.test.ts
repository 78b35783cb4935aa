import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { serveEverything, serveScripted, type ScriptedTool } from "../helpers/upstream.js";
import { eventually } from "../helpers/eventually.js";
import { watchListChanged } from "../helpers/mcp.js";

const echoTool = (label: string): ScriptedTool => ({
  tool: {
    name: "echo",
    description: `echo from ${label}`,
    inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
  },
  run: (args) => ({ content: [{ type: "text", text: `${label}: ${String(args.message)}` }] }),
});
const slowTool: ScriptedTool = {
  tool: { name: "slow", description: "answers after 3 s", inputSchema: { type: "object" } },
  run: () => new Promise((resolve) => setTimeout(() => resolve({ content: [{ type: "text", text: "late" }] }), 3000)),
};

describe("upstream MCP servers", () => {
  let server: TestServer;
  let headers: Record<string, string>;
  let everything: Awaited<ReturnType<typeof serveEverything>>;
  let scripted: Awaited<ReturnType<typeof serveScripted>>;
  const clients: Client[] = [];

  beforeAll(async () => {
    [everything, scripted] = await Promise.all([serveEverything(), serveScripted([echoTool("scripted"), slowTool])]);
    server = await startTestServer({
      MCP_SERVERS_ALLOW_PRIVATE: "true",
      GATEWAY_TIMEOUT_SECONDS: "1",
      GATEWAY_MAX_RETRIES: "0",
      GATEWAY_RATE_LIMIT_RPM: "10000",
    });
    headers = bearer((await registerUser(server)).token);
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
    await Promise.all([everything.close(), scripted.close()]);
  });

  async function mcpClient() {
    const client = new Client({ name: "upstream-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers } }));
    clients.push(client);
    return client;
  }

  it("registers server-everything: its tools join the catalog namespaced, over REST and MCP", async () => {
    const created = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers,
      json: { name: "everything", url: everything.url, headers: { "x-upstream-secret": "s3cret" } },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: "everything", health: "healthy", lastError: null, headers: ["x-upstream-secret"] });
    expect(created.body.tools).toEqual(expect.arrayContaining(["everything__echo", "everything__get-sum"]));
    expect(JSON.stringify(created.body)).not.toContain("s3cret");

    const listed = await server.request("/gateway/v1/mcp/servers", { headers });
    expect(listed.body.servers.map((entry: { name: string }) => entry.name)).toEqual(["everything"]);

    const tools = await server.request("/gateway/v1/mcp/tools?category=mcp", { headers });
    expect(tools.status).toBe(200);
    expect(tools.body.tools.every((tool: { source: string }) => tool.source === "mcp")).toBe(true);
    expect(tools.body.tools.map((tool: { name: string }) => tool.name)).toContain("everything__echo");

    const viaRest = await server.request("/gateway/v1/mcp/tools/execute?tool=everything__echo", {
      method: "POST",
      headers,
      json: { args: { message: "over REST" } },
    });
    expect(viaRest.status).toBe(200);
    expect(viaRest.body.content).toEqual([{ type: "text", text: "Echo: over REST" }]);

    const client = await mcpClient();
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    expect(names).toEqual(expect.arrayContaining(["calculator", "everything__echo", "everything__get-sum"]));
    const sum = (await client.callTool({ name: "everything__get-sum", arguments: { a: 2, b: 40 } })) as CallToolResult;
    expect(sum.isError).toBeFalsy();
    expect(JSON.stringify(sum.content)).toContain("42");
  });

  it("keeps two servers' same-named tools apart", async () => {
    const created = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers,
      json: { name: "scripted", url: scripted.url, category: "scripted" },
    });
    expect(created.status).toBe(201);
    expect(created.body.health).toBe("healthy");
    const duplicate = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers,
      json: { name: "scripted", url: scripted.url },
    });
    expect(duplicate.status).toBe(409);

    const client = await mcpClient();
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    expect(names).toEqual(expect.arrayContaining(["everything__echo", "scripted__echo", "scripted__slow"]));
    const a = (await client.callTool({ name: "scripted__echo", arguments: { message: "x" } })) as CallToolResult;
    const b = (await client.callTool({ name: "everything__echo", arguments: { message: "x" } })) as CallToolResult;
    expect(a.content).toEqual([{ type: "text", text: "scripted: x" }]);
    expect(b.content).toEqual([{ type: "text", text: "Echo: x" }]);
    const category = await server.request("/gateway/v1/mcp/tools?category=scripted", { headers });
    expect(category.body.tools.map((tool: { name: string }) => tool.name)).toEqual(["scripted__echo", "scripted__slow"]);
  });

  it("follows the upstream's tools/list_changed and tells MCP sessions", async () => {
    const client = await mcpClient();
    const listChanged = await watchListChanged(client, server.bridge.catalog);
    const seen = listChanged.count();
    await scripted.setTools([
      echoTool("scripted"),
      slowTool,
      { ...echoTool("scripted"), tool: { ...echoTool("scripted").tool, name: "added_later" } },
    ]);
    await eventually(async () => (await server.request("/gateway/v1/mcp/tools/scripted__added_later", { headers })).status === 200);
    await eventually(() => listChanged.count() > seen);
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain("scripted__added_later");
  });

  it("answers a slow tool with a 504 naming the server and the bound", async () => {
    const slow = await server.request("/gateway/v1/mcp/tools/execute?tool=scripted__slow", { method: "POST", headers, json: { args: {} } });
    expect(slow.status).toBe(504);
    expect(slow.body.error.message).toBe("MCP server scripted did not answer scripted__slow within 1 s");
    const client = await mcpClient();
    const overMcp = (await client.callTool({ name: "scripted__slow", arguments: {} })) as CallToolResult;
    expect(overMcp.isError).toBe(true);
    expect(overMcp.structuredContent).toMatchObject({ error: { code: "TIMEOUT" } });
  });

  it("registers a server that is down as unhealthy, with the reason; public /bridge/health only counts tenants' servers", async () => {
    const down = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers,
      json: { name: "down", url: "http://127.0.0.1:9/mcp" },
    });
    expect(down.status).toBe(201);
    expect(down.body.health).toBe("unhealthy");
    expect(down.body.lastError).toMatch(/ECONNREFUSED|fetch failed/);
    expect(down.body.tools).toEqual([]);

    const listed = await server.request("/gateway/v1/mcp/servers", { headers });
    const byName = Object.fromEntries(listed.body.servers.map((entry: { name: string }) => [entry.name, entry]));
    expect(byName.everything).toMatchObject({ health: "healthy", shared: false });
    expect(byName.scripted).toMatchObject({ health: "healthy", toolCount: 3 });
    expect(byName.down).toMatchObject({ health: "unhealthy", toolCount: 0 });

    // Public: a tenant's server is neither named nor a reason to call the bridge degraded.
    const health = await server.request("/bridge/health");
    expect(health.status).toBe(200);
    expect(health.body.status).toBe("ok");
    expect(health.body.mcpServers).toEqual([]);
    expect(health.body.tenantMcpServers).toEqual({ total: 3, healthy: 2, unhealthy: 1 });
    expect(JSON.stringify(health.body)).not.toContain("down");

    expect((await server.request("/gateway/v1/mcp/servers/down", { method: "DELETE", headers })).status).toBe(200);
    expect((await server.request("/gateway/v1/mcp/servers/down", { method: "DELETE", headers })).status).toBe(404);
    expect((await server.request("/bridge/health")).body.status).toBe("ok");
  });

  it("marks a server that went away unhealthy and fails its calls with 502", async () => {
    const gone = await serveScripted([echoTool("gone")]);
    expect(
      (await server.request("/gateway/v1/mcp/servers", { method: "POST", headers, json: { name: "gone", url: gone.url } })).body.health,
    ).toBe("healthy");
    await gone.close();
    const call = await server.request("/gateway/v1/mcp/tools/execute?tool=gone__echo", {
      method: "POST",
      headers,
      json: { args: { message: "x" } },
    });
    expect(call.status).toBe(502);
    expect(call.body.error.message).toMatch(/^MCP server gone is unreachable/);
    const listed = await server.request("/gateway/v1/mcp/servers", { headers });
    expect(listed.body.servers.find((entry: { name: string }) => entry.name === "gone")).toMatchObject({ health: "unhealthy" });
    // Its tools left the catalog.
    expect((await server.request("/gateway/v1/mcp/tools/gone__echo", { headers })).status).toBe(404);
    await server.request("/gateway/v1/mcp/servers/gone", { method: "DELETE", headers });
  });

  it("removes a server's tools on DELETE", async () => {
    expect((await server.request("/gateway/v1/mcp/servers/everything", { method: "DELETE", headers })).body).toEqual({
      success: true,
      name: "everything",
    });
    const tools = await server.request("/gateway/v1/mcp/tools", { headers });
    expect(tools.body.tools.some((tool: { name: string }) => tool.name.startsWith("everything__"))).toBe(false);
  });
});

describe("upstream MCP server registration rules", () => {
  it("refuses a loopback address unless MCP_SERVERS_ALLOW_PRIVATE=true", async () => {
    const server = await startTestServer();
    const upstream = await serveScripted([echoTool("private")]);
    try {
      const headers = bearer((await registerUser(server)).token);
      const refused = await server.request("/gateway/v1/mcp/servers", {
        method: "POST",
        headers,
        json: { name: "private", url: upstream.url },
      });
      expect(refused.status).toBe(403);
      // The caller reads the rule in words; the operator's variable stays in the docs.
      expect(refused.body.error.message).toContain("this deployment does not connect to MCP servers on private addresses");
      expect(refused.body.error.message).not.toContain("ALLOW_PRIVATE");
      expect(upstream.sessions()).toBe(0);
      expect((await server.request("/gateway/v1/mcp/servers", { headers })).body.count).toBe(0);
      expect((await server.request("/gateway/v1/mcp/servers", { method: "POST", json: { name: "anon", url: upstream.url } })).status).toBe(
        401,
      );
    } finally {
      await server.close();
      await upstream.close();
    }
  });

  it("reconnects persisted registrations after a restart (fs storage)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gw-upstream-"));
    const upstream = await serveScripted([echoTool("persisted")]);
    const env = { STORAGE: "fs", DATA_DIR: dir, MCP_SERVERS_ALLOW_PRIVATE: "true" };
    try {
      const first = await startTestServer(env);
      const user = await registerUser(first);
      const created = await first.request("/gateway/v1/mcp/servers", {
        method: "POST",
        headers: bearer(user.token),
        json: { name: "persisted", url: upstream.url },
      });
      expect(created.body.health).toBe("healthy");
      await first.close();

      const second = await startTestServer(env);
      try {
        const headers = bearer(user.token);
        await eventually(async () => (await second.request("/gateway/v1/mcp/servers", { headers })).body.servers[0]?.health === "healthy");
        const call = await second.request("/gateway/v1/mcp/tools/execute?tool=persisted__echo", {
          method: "POST",
          headers,
          json: { args: { message: "again" } },
        });
        expect(call.body.content).toEqual([{ type: "text", text: "persisted: again" }]);
        expect(upstream.sessions()).toBe(2);
      } finally {
        await second.close();
      }
    } finally {
      await upstream.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
