import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { serveScripted, type ScriptedTool } from "../../helpers/upstream.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * Bounded input from upstream MCP servers (docs/security.md "Input bounds"): a server
 * announcing an oversized schema or more than 1,000 tools is marked unhealthy with the reason,
 * and listing keeps answering for everyone. Real SDK servers on loopback.
 */

const SERVICE_KEY = "service-key-for-upstream-bounds-0123456789";

const tool = (name: string, inputSchema: Tool["inputSchema"] = { type: "object" }): ScriptedTool => ({
  tool: { name, description: name, inputSchema },
  run: () => ({ content: [{ type: "text", text: name }] }),
});

function deepSchema(levels: number): Tool["inputSchema"] {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < levels; i++) schema = { type: "object", properties: { x: schema } };
  return schema as Tool["inputSchema"];
}

const wideSchema = {
  type: "object",
  properties: Object.fromEntries(Array.from({ length: 1500 }, (_, i) => [`field_${i}`, { type: "string", description: "y".repeat(40) }])),
} as Tool["inputSchema"];

describe("upstream MCP servers: bounded announcements", () => {
  let server: TestServer;
  let headers: Record<string, string>;
  let token: string;
  const upstreams: Awaited<ReturnType<typeof serveScripted>>[] = [];

  beforeAll(async () => {
    server = await startTestServer({
      MCP_SERVERS_ALLOW_PRIVATE: "true",
      PLATFORM_SERVICE_KEY: SERVICE_KEY,
      GATEWAY_MAX_RETRIES: "0",
      GATEWAY_RATE_LIMIT_RPM: "10000",
    });
    token = (await registerUser(server)).token;
    headers = bearer(token);
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
    await Promise.all(upstreams.map((upstream) => upstream.close()));
  });

  async function register(name: string, tools: ScriptedTool[]) {
    const upstream = await serveScripted(tools);
    upstreams.push(upstream);
    const res = await server.request("/gateway/v1/mcp/servers", { method: "POST", headers, json: { name, url: upstream.url } });
    expect(res.status).toBe(201);
    return { res, upstream };
  }

  async function listingAnswersForEveryone(): Promise<string[]> {
    const started = performance.now();
    const rest = await server.request("/bridge/v1/mcp/tools", { headers });
    expect(rest.status).toBe(200);
    for (const credential of [token, SERVICE_KEY]) {
      const client = new Client({ name: "bounds", version: "1.0.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(credential) } }),
      );
      try {
        expect((await client.listTools(undefined, { timeout: 3000 })).tools.length).toBeGreaterThan(0);
      } finally {
        await client.close();
      }
    }
    expect(performance.now() - started).toBeLessThan(3000);
    return rest.body.tools.map((entry: { name: string }) => entry.name);
  }

  it("marks unhealthy a server whose schema is deeper than 32 levels", async () => {
    const { res } = await register("deep", [tool("ok"), tool("nested", deepSchema(500))]);
    expect(res.body.health).toBe("unhealthy");
    expect(res.body.lastError).toBe("MCP server deep announced tool nested: inputSchema is deeper than 32 levels");
    expect((await listingAnswersForEveryone()).some((name) => name.startsWith("deep__"))).toBe(false);
  });

  it("marks unhealthy a server whose schema is larger than 64 KiB", async () => {
    const { res } = await register("wide", [tool("wide", wideSchema)]);
    expect(res.body.health).toBe("unhealthy");
    expect(res.body.lastError).toMatch(/tool wide: inputSchema is larger than 64 KiB/);
    await listingAnswersForEveryone();
  });

  it("marks unhealthy a server announcing 1,001 tools; 1,000 are accepted", async () => {
    const { res } = await register(
      "many",
      Array.from({ length: 1001 }, (_, i) => tool(`t${i}`)),
    );
    expect(res.body.health).toBe("unhealthy");
    expect(res.body.lastError).toMatch(/announces 1001 tools; at most 1000 tools per source/);
    const fits = await register(
      "enough",
      Array.from({ length: 1000 }, (_, i) => tool(`t${i}`)),
    );
    expect(fits.res.body).toMatchObject({ health: "healthy", toolCount: 1000 });
    const names = await listingAnswersForEveryone();
    expect(names.filter((name) => name.startsWith("enough__"))).toHaveLength(1000);
    expect(names.some((name) => name.startsWith("many__"))).toBe(false);
  });

  it("a healthy server that changes to an oversized list (list_changed) becomes unhealthy; the others keep listing", async () => {
    const { res, upstream } = await register("changing", [tool("fine")]);
    expect(res.body.health).toBe("healthy");
    await upstream.setTools([tool("fine"), tool("nested", deepSchema(100))]);
    const entry = await eventually(async () => {
      const servers = (await server.request("/gateway/v1/mcp/servers", { headers })).body.servers as {
        name: string;
        health: string;
        lastError: string;
      }[];
      const found = servers.find((candidate) => candidate.name === "changing");
      return found?.health === "unhealthy" ? found : undefined;
    });
    expect(entry!.lastError).toMatch(/tool nested: inputSchema is deeper than 32 levels/);
    const names = await listingAnswersForEveryone();
    expect(names).toContain("calculator");
    expect(names.some((name) => name.startsWith("changing__"))).toBe(false);
  });
});
