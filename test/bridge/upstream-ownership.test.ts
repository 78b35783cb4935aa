import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { bearer, registerUser, startTestServer, TEST_JWT_SECRET, TEST_DATA_SECRET, type TestServer } from "../helpers/server.js";
import { serveScripted, type ScriptedTool } from "../helpers/upstream.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";
import { loadConfig } from "../../rpc/config.js";
import { createLogger } from "../../rpc/log.js";
import { compose } from "../../rpc/compose.js";
import { noTools } from "../../rpc/tools/no-tools.js";
import { runAdmin } from "../../scripts/admin-commands.js";
import { eventually } from "../helpers/eventually.js";

/**
 * Issue 9 item 1: an upstream MCP server belongs to the registering user's tenant. Two users A
 * and B in two tenants, on every route that takes a server name (or a tool of one): B gets
 * exactly the answer it got before A registered the server, and A's server keeps working.
 */

const tool = (label: string, name: string, description: string): ScriptedTool => ({
  tool: { name, description, inputSchema: { type: "object", properties: { message: { type: "string" } } } },
  run: (args) => ({ content: [{ type: "text", text: `${label}: ${String(args.message ?? "")}` }] }),
});

/** A response without what differs per request (the request id), for "the same answer" checks. */
const same = (res: { status: number; body: any }) => {
  const body = JSON.parse(JSON.stringify(res.body ?? null));
  if (body?.error) delete body.error.requestId;
  return { status: res.status, body };
};

describe.each(["memory", "redis"] as const)("upstream MCP servers belong to a tenant (%s)", (storage) => {
  const prefix = uniqueRedisPrefix();
  let server: TestServer;
  let a: Record<string, string>;
  let b: Record<string, string>;
  let aTenant: string;
  let upstreamA: Awaited<ReturnType<typeof serveScripted>>;
  let upstreamB: Awaited<ReturnType<typeof serveScripted>>;
  const clients: Client[] = [];

  beforeAll(async () => {
    [upstreamA, upstreamB] = await Promise.all([
      serveScripted([tool("A", "echo", "echo a message"), tool("A", "quartz", "polish quartz crystals")]),
      serveScripted([tool("B", "echo", "echo a message")]),
    ]);
    server = await startTestServer({
      MCP_SERVERS_ALLOW_PRIVATE: "true",
      GATEWAY_RATE_LIMIT_RPM: "100000",
      GATEWAY_MAX_RETRIES: "0",
      ...(storage === "redis" ? { STORAGE: "redis", REDIS_PREFIX: prefix } : {}),
    });
    const userA = await registerUser(server);
    a = bearer(userA.token);
    aTenant = userA.user.tenantId;
    b = bearer((await registerUser(server)).token);
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
    await Promise.all([upstreamA.close(), upstreamB.close()]);
    if (storage === "redis") await dropRedisPrefix(prefix);
  });

  async function mcp(headers: Record<string, string>) {
    const client = new Client({ name: "ownership-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers } }));
    clients.push(client);
    return client;
  }

  /** Every request B can make that names A's server `quartzco` or its tool `quartzco__quartz`. */
  async function bProbes(client: Client) {
    const post = (path: string, json: unknown) => server.request(path, { method: "POST", headers: b, json });
    const mcpCall = await client.callTool({ name: "quartzco__quartz", arguments: { message: "x" } }).then(
      (result) => ({ result }),
      (error: Error) => ({ error: error.message }),
    );
    return {
      deleteServer: same(await server.request("/gateway/v1/mcp/servers/quartzco", { method: "DELETE", headers: b })),
      listServers: same(await server.request("/gateway/v1/mcp/servers", { headers: b })),
      getTool: same(await server.request("/gateway/v1/mcp/tools/quartzco__quartz", { headers: b })),
      executeTool: same(await post("/gateway/v1/mcp/tools/execute?tool=quartzco__quartz", { args: { message: "x" } })),
      catalog: (await server.request("/gateway/v1/mcp/tools", { headers: b })).body.tools.map((entry: { name: string }) => entry.name),
      bridgeCatalog: (await server.request("/bridge/v1/mcp/tools", { headers: b })).body.count,
      mcpList: (await client.listTools()).tools.map((entry) => entry.name),
      mcpCall,
      route: same(await post("/gateway/v1/mcp/route", { input: "polish quartz crystals", preferredMcp: "quartzco" })),
      routerTools: (await server.request("/gateway/v1/mcp/router/tools", { headers: b })).body.tools.map(
        (entry: { name: string }) => entry.name,
      ),
      plan: (await post("/gateway/v1/mcp/plan", { input: "polish quartz crystals", preferredMcp: "quartzco" })).body.steps.map(
        (step: { tool: string }) => step.tool,
      ),
      execute: same(await post("/gateway/v1/mcp/execute", { steps: [{ tool: "quartzco__quartz", args: { message: "x" } }] })),
      ask: same(await post("/gateway/v1/mcp/ask", { input: "polish quartz crystals", preferredMcp: "quartzco", approve: true })),
      agent: same(await post("/gateway/v1/agents", { name: "thief", model: "echo-1", tools: ["quartzco__quartz"] })),
    };
  }

  it("gives B the same answers on every route before and after A registers a server, and leaves A's server alone", async () => {
    const client = await mcp(b);
    const before = await bProbes(client);
    expect(before.deleteServer).toMatchObject({ status: 404, body: { error: { code: "NOT_FOUND" } } });
    expect(before.getTool.status).toBe(404);
    expect(before.executeTool.status).toBe(404);
    expect(before.execute.status).toBe(404);
    expect(before.agent.status).toBe(400);

    const created = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: a,
      json: { name: "quartzco", url: upstreamA.url, headers: { Authorization: "Bearer upstream-secret-of-A" } },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: "quartzco", health: "healthy", shared: false, headers: ["Authorization"] });
    expect(JSON.stringify(created.body)).not.toContain("upstream-secret-of-A");
    expect(upstreamA.requestHeaders.at(-1)?.authorization).toBe("Bearer upstream-secret-of-A");
    await eventually(async () => (await server.request("/gateway/v1/mcp/tools/quartzco__quartz", { headers: a })).status === 200);

    const after = await bProbes(client);
    expect(after).toEqual(before);

    // A's server is untouched and serves A on every surface.
    const listed = await server.request("/gateway/v1/mcp/servers", { headers: a });
    expect(listed.body.servers.map((entry: { name: string }) => entry.name)).toEqual(["quartzco"]);
    expect(JSON.stringify(listed.body)).not.toContain("upstream-secret-of-A");
    const run = await server.request("/gateway/v1/mcp/tools/execute?tool=quartzco__quartz", {
      method: "POST",
      headers: a,
      json: { args: { message: "mine" } },
    });
    expect(run.body.content).toEqual([{ type: "text", text: "A: mine" }]);
    const aClient = await mcp(a);
    expect((await aClient.listTools()).tools.map((entry) => entry.name)).toContain("quartzco__quartz");
    expect(((await aClient.callTool({ name: "quartzco__quartz", arguments: { message: "m" } })) as CallToolResult).content).toEqual([
      { type: "text", text: "A: m" },
    ]);
    const routed = await server.request("/gateway/v1/mcp/route", { method: "POST", headers: a, json: { input: "polish quartz crystals" } });
    expect(routed.body).toMatchObject({ server: "quartzco", tool: "quartzco__quartz" });
    const agent = await server.request("/gateway/v1/agents", {
      method: "POST",
      headers: a,
      json: { name: "polisher", model: "echo-1", tools: ["quartzco__quartz"] },
    });
    expect(agent.status).toBe(201);
  });

  it("keeps names unique per tenant: two tenants each have `docs`, and each sees and calls its own", async () => {
    const mine = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: a,
      json: { name: "docs", url: upstreamA.url },
    });
    const theirs = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: b,
      json: { name: "docs", url: upstreamB.url },
    });
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    expect(
      (await server.request("/gateway/v1/mcp/servers", { method: "POST", headers: a, json: { name: "docs", url: upstreamB.url } })).status,
    ).toBe(409);

    const call = (headers: Record<string, string>) =>
      server.request("/gateway/v1/mcp/tools/execute?tool=docs__echo", { method: "POST", headers, json: { args: { message: "hi" } } });
    expect((await call(a)).body.content).toEqual([{ type: "text", text: "A: hi" }]);
    expect((await call(b)).body.content).toEqual([{ type: "text", text: "B: hi" }]);
    const bList = await server.request("/gateway/v1/mcp/servers", { headers: b });
    expect(bList.body.servers).toEqual([expect.objectContaining({ name: "docs", url: upstreamB.url })]);
    const bTools = (await server.request("/gateway/v1/mcp/tools?category=mcp", { headers: b })).body.tools.map(
      (entry: { name: string }) => entry.name,
    );
    expect(bTools).toEqual(["docs__echo"]);

    // Deleting is per tenant too: B's delete removes B's docs only.
    expect((await server.request("/gateway/v1/mcp/servers/docs", { method: "DELETE", headers: b })).status).toBe(200);
    expect((await call(b)).status).toBe(404);
    expect((await call(a)).body.content).toEqual([{ type: "text", text: "A: hi" }]);
    await server.request("/gateway/v1/mcp/servers/docs", { method: "DELETE", headers: a });
  });

  it("answers `tenantId` naming another user's tenant like a missing tenant", async () => {
    const list = await server.request(`/gateway/v1/mcp/servers?tenantId=${aTenant}`, { headers: b });
    const missing = await server.request(`/gateway/v1/mcp/servers?tenantId=ten_missing`, { headers: b });
    expect(list.status).toBe(404);
    expect(same(list).body.error.code).toBe(same(missing).body.error.code);
    const register = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: b,
      json: { name: "sneaky", url: upstreamB.url, tenantId: aTenant },
    });
    expect(register.status).toBe(404);
    expect(
      (await server.request("/gateway/v1/mcp/servers", { headers: a })).body.servers.map((entry: { name: string }) => entry.name),
    ).toEqual(["quartzco"]);
  });

  it("keeps tenants' server names out of the public /bridge/health", async () => {
    const health = await server.request("/bridge/health");
    expect(health.body.mcpServers).toEqual([]);
    expect(health.body.tenantMcpServers.total).toBeGreaterThan(0);
    expect(JSON.stringify(health.body)).not.toContain("quartzco");
  });
});

describe("servers an operator shares with every tenant (npm run admin, Redis)", () => {
  const prefix = uniqueRedisPrefix();
  const env = {
    STORAGE: "redis",
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: prefix,
    MCP_SERVERS_ALLOW_PRIVATE: "true",
    GATEWAY_RATE_LIMIT_RPM: "100000",
  };
  let server: TestServer;
  let upstream: Awaited<ReturnType<typeof serveScripted>>;

  beforeAll(async () => {
    upstream = await serveScripted([tool("shared", "echo", "echo a message")]);
    server = await startTestServer(env);
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
    await upstream.close();
    await dropRedisPrefix(prefix);
  });

  async function admin(...args: string[]) {
    // The admin command as scripts/admin.ts runs it: its own services on the same storage.
    const config = loadConfig({
      ...env,
      GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
      DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
      LOG_LEVEL: "silent",
    });
    const services = await compose(config, createLogger("silent"), noTools);
    try {
      return await runAdmin(args, services);
    } finally {
      await services.close();
    }
  }

  it("lists a shared server's tools for every tenant; tenants cannot delete it or take its name", async () => {
    process.env.SHARED_UPSTREAM_TOKEN = "shared-upstream-token";
    const added = (await admin(
      "add-mcp-server",
      "--name",
      "team",
      "--url",
      upstream.url,
      "--header-env",
      "Authorization=SHARED_UPSTREAM_TOKEN",
    )) as Record<string, unknown>;
    expect(added).toMatchObject({ name: "team", shared: true, headers: ["Authorization"] });
    expect(JSON.stringify(added)).not.toContain("shared-upstream-token");

    const a = bearer((await registerUser(server)).token);
    const b = bearer((await registerUser(server)).token);
    for (const headers of [a, b]) {
      await eventually(async () => (await server.request("/gateway/v1/mcp/tools/team__echo", { headers })).status === 200);
      const call = await server.request("/gateway/v1/mcp/tools/execute?tool=team__echo", {
        method: "POST",
        headers,
        json: { args: { message: "all" } },
      });
      expect(call.body.content).toEqual([{ type: "text", text: "shared: all" }]);
      const listed = await server.request("/gateway/v1/mcp/servers", { headers });
      expect(listed.body.servers).toEqual([expect.objectContaining({ name: "team", shared: true })]);
      // Its own endpoint serves every tenant, with the server's own tool names.
      const own = await fetch(server.url("/bridge/mcp/servers/team/"), {
        method: "POST",
        headers: { ...headers, "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo", arguments: { message: "direct" } } }),
      });
      expect(((await own.json()) as { result: CallToolResult }).result.content).toEqual([{ type: "text", text: "shared: direct" }]);
    }
    expect(upstream.requestHeaders.at(-1)?.authorization).toBe("shared-upstream-token");
    expect((await server.request("/gateway/v1/mcp/servers/team", { method: "DELETE", headers: a })).status).toBe(403);
    expect(
      (await server.request("/gateway/v1/mcp/servers", { method: "POST", headers: b, json: { name: "team", url: upstream.url } })).status,
    ).toBe(409);
    expect((await server.request("/bridge/health")).body.mcpServers).toEqual([
      expect.objectContaining({ name: "team", health: "healthy" }),
    ]);

    expect(await admin("list-mcp-servers")).toEqual([expect.objectContaining({ name: "team", headers: ["Authorization"] })]);
    await expect(admin("add-mcp-server", "--name", "team", "--url", upstream.url)).rejects.toThrow(/already shared/);
    expect(await admin("remove-mcp-server", "--name", "team")).toEqual({ success: true, name: "team" });
    await eventually(async () => (await server.request("/gateway/v1/mcp/tools/team__echo", { headers: a })).status === 404);
    const gone = await fetch(server.url("/bridge/mcp/servers/team/"), {
      method: "POST",
      headers: { ...a, "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(gone.status).toBe(404);
  });
});
