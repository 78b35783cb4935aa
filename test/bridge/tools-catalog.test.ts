import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { connectVm, vmSocketUrl, type TestVm } from "../helpers/vm.js";

const SERVICE_KEY = "service-key-for-tests-0123456789";

describe("tool catalog over REST", () => {
  let server: TestServer;
  let headers: Record<string, string>;
  let owner: Awaited<ReturnType<typeof registerUser>>;
  let vm: TestVm;
  let vmCalls = 0;

  beforeAll(async () => {
    server = await startTestServer({ GATEWAY_RATE_LIMIT_RPM: "10000", PLATFORM_SERVICE_KEY: SERVICE_KEY });
    owner = await registerUser(server);
    headers = bearer(owner.token);
    vm = await connectVm(vmSocketUrl(server.origin, "agent", { vmId: "catalog-vm" }), owner.token, {
      "tools/call": ({ arguments: args }) => {
        vmCalls += 1;
        return { content: [{ type: "text", text: `n=${args.n}` }] };
      },
    });
    await vm.register([
      {
        name: "count",
        inputSchema: { type: "object", properties: { n: { type: "integer", minimum: 0 } }, required: ["n"] },
        category: "vmcat",
      },
    ]);
  });
  afterAll(async () => {
    await vm.close();
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  it("lists every tool, filtered by category", async () => {
    const all = await server.request("/gateway/v1/mcp/tools", { headers });
    expect(all.status).toBe(200);
    expect(all.body.count).toBe(all.body.tools.length);
    const names = all.body.tools.map((tool: { name: string }) => tool.name);
    expect(names).toEqual(expect.arrayContaining(["calculator", "current_time", "http_fetch", "text_stats", "vm__catalog-vm__count"]));
    expect(names).toEqual([...names].sort());

    const math = await server.request("/gateway/v1/mcp/tools?category=math", { headers });
    expect(math.body.tools.map((tool: { name: string }) => tool.name)).toEqual(["calculator"]);
    const vmOnly = await server.request("/gateway/v1/mcp/tools?category=vmcat", { headers });
    expect(vmOnly.body.tools).toEqual([expect.objectContaining({ name: "vm__catalog-vm__count", source: "vm", category: "vmcat" })]);
    expect((await server.request("/gateway/v1/mcp/tools?category=none-such", { headers })).body).toEqual({ tools: [], count: 0 });
  });

  it("gets one tool with its schema, 404 for an unknown name", async () => {
    const tool = await server.request("/gateway/v1/mcp/tools/calculator", { headers });
    expect(tool.status).toBe(200);
    expect(tool.body).toMatchObject({ name: "calculator", category: "math", source: "builtin", inputSchema: { required: ["expression"] } });
    const missing = await server.request("/gateway/v1/mcp/tools/nope", { headers });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("NOT_FOUND");
  });

  it("executes a tool, refusing bad args with 400 before it runs and unknown tools with 404", async () => {
    const ok = await server.request("/gateway/v1/mcp/tools/execute?tool=calculator", {
      method: "POST",
      headers,
      json: { args: { expression: "2 ^ 10" } },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.content[0].text).toBe("1024");

    const vmOk = await server.request("/gateway/v1/mcp/tools/execute?tool=vm__catalog-vm__count", {
      method: "POST",
      headers,
      json: { args: { n: 3 } },
    });
    expect(vmOk.body.content).toEqual([{ type: "text", text: "n=3" }]);
    expect(vmCalls).toBe(1);

    const bad = await server.request("/gateway/v1/mcp/tools/execute?tool=vm__catalog-vm__count", {
      method: "POST",
      headers,
      json: { args: { n: -1 } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("VALIDATION_FAILED");
    expect(bad.body.error.details.issues).toEqual([{ path: "n", message: "must be >= 0" }]);
    const missingArg = await server.request("/gateway/v1/mcp/tools/execute?tool=calculator", {
      method: "POST",
      headers,
      json: { args: {} },
    });
    expect(missingArg.status).toBe(400);
    expect(missingArg.body.error.details.issues).toEqual([{ path: "expression", message: "is required" }]);
    expect(vmCalls).toBe(1); // never reached the VM

    const unknown = await server.request("/gateway/v1/mcp/tools/execute?tool=nope", { method: "POST", headers, json: { args: {} } });
    expect(unknown.status).toBe(404);
    const noTool = await server.request("/gateway/v1/mcp/tools/execute", { method: "POST", headers, json: { args: {} } });
    expect(noTool.status).toBe(400);
  });

  it("keeps another tenant away from a VM's tools: not listed, same 404 as an unknown tool", async () => {
    const stranger = await registerUser(server);
    const res = await server.request("/gateway/v1/mcp/tools/execute?tool=vm__catalog-vm__count", {
      method: "POST",
      headers: bearer(stranger.token),
      json: { args: { n: 1 } },
    });
    expect(res.status).toBe(404);
    expect(res.body.error.message).toBe("Unknown tool: vm__catalog-vm__count");
    // Nor are they listed to it, over REST or MCP.
    const listed = await server.request("/gateway/v1/mcp/tools", { headers: bearer(stranger.token) });
    expect(listed.body.tools.map((tool: { name: string }) => tool.name)).not.toContain("vm__catalog-vm__count");
    expect(listed.body.tools.map((tool: { name: string }) => tool.name)).toContain("calculator");
    expect((await server.request("/gateway/v1/mcp/tools/vm__catalog-vm__count", { headers: bearer(stranger.token) })).status).toBe(404);
    const client = new Client({ name: "stranger", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(stranger.token) } }),
    );
    try {
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      expect(names).toContain("calculator");
      expect(names.some((name) => name.startsWith("vm__"))).toBe(false);
    } finally {
      await client.close();
    }
    expect((await server.request("/gateway/v1/mcp/tools/vm__catalog-vm__count", { headers })).status).toBe(200);
  });

  it("serves the bridge catalog with bearer auth: session token, sk_ key (also as X-API-Key)", async () => {
    expect((await server.request("/bridge/v1/mcp/tools")).status).toBe(401);
    expect((await server.request("/bridge/v1/mcp/tools", { headers: bearer("sk_invalid") })).status).toBe(401);
    const viaSession = await server.request("/bridge/v1/mcp/tools", { headers });
    expect(viaSession.status).toBe(200);
    expect(viaSession.body.tools.map((tool: { name: string }) => tool.name)).toContain("calculator");

    const key = (await server.request("/gateway/v1/auth/keys", { method: "POST", headers, json: { name: "bridge", description: "" } })).body
      .key as string;
    expect(key).toMatch(/^sk_/);
    expect((await server.request("/bridge/v1/mcp/tools", { headers: bearer(key) })).status).toBe(200);
    expect((await server.request("/bridge/v1/mcp/tools", { headers: { "x-api-key": key } })).status).toBe(200);
  });

  it("reports health publicly", async () => {
    const health = await server.request("/bridge/health");
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: "ok", storage: { driver: "memory", ok: true }, mcpServers: [], vms: { connected: 1 } });
    expect(health.body.tools).toBeGreaterThanOrEqual(5);
  });

  it("lets MCP clients in with an sk_ key and with PLATFORM_SERVICE_KEY", async () => {
    const key = (await server.request("/gateway/v1/auth/keys", { method: "POST", headers, json: { name: "mcp", description: "" } })).body
      .key as string;
    for (const credential of [key, SERVICE_KEY]) {
      const client = new Client({ name: "key-client", version: "1.0.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/mcp/")), { requestInit: { headers: bearer(credential) } }),
      );
      try {
        const result = (await client.callTool({ name: "calculator", arguments: { expression: "1 + 1" } })) as CallToolResult;
        expect((result.content[0] as { text: string }).text).toBe("2");
      } finally {
        await client.close();
      }
    }
    // The service key reaches VM tools of any tenant (internal services act for them).
    const client = new Client({ name: "service", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(SERVICE_KEY) } }),
    );
    try {
      const result = (await client.callTool({ name: "vm__catalog-vm__count", arguments: { n: 9 } })) as CallToolResult;
      expect(result.content).toEqual([{ type: "text", text: "n=9" }]);
    } finally {
      await client.close();
    }
  });
});

describe("GATEWAY_RATE_LIMIT_RPM on the MCP endpoint", () => {
  it("counts every MCP request against the credential and answers 429 with Retry-After", async () => {
    const server = await startTestServer({ GATEWAY_RATE_LIMIT_RPM: "4" });
    try {
      const { token } = await registerUser(server);
      const post = (body: unknown, sessionId?: string) =>
        fetch(server.url("/bridge/mcp/"), {
          method: "POST",
          headers: {
            ...bearer(token),
            accept: "application/json, text/event-stream",
            "content-type": "application/json",
            ...(sessionId ? { "mcp-session-id": sessionId } : {}),
          },
          body: JSON.stringify(body),
        });
      const init = await post({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "rl", version: "1" } },
      });
      const sessionId = init.headers.get("mcp-session-id")!;
      expect(init.status).toBe(200);
      expect((await post({ jsonrpc: "2.0", method: "notifications/initialized" }, sessionId)).status).toBe(202);
      expect((await post({ jsonrpc: "2.0", id: 2, method: "tools/list" }, sessionId)).status).toBe(200);
      expect((await post({ jsonrpc: "2.0", id: 3, method: "tools/list" }, sessionId)).status).toBe(200);
      const limited = await post({ jsonrpc: "2.0", id: 4, method: "tools/list" }, sessionId);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(await limited.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32029 } });
      // The REST bridge surface shares the same budget.
      expect((await server.request("/bridge/v1/mcp/tools", { headers: bearer(token) })).status).toBe(429);
    } finally {
      await server.close();
    }
  });
});
