import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResolveHost } from "../../../rpc/outbound/outbound-guard.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { serveScripted, type ScriptedTool } from "../../helpers/upstream.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * The address rule at every connection to an upstream MCP server (docs/security.md "Outbound
 * connections"). Names resolve through an injected resolver: no DNS, nothing beyond loopback.
 */

const echo: ScriptedTool = {
  tool: { name: "echo", description: "echo", inputSchema: { type: "object", properties: { message: { type: "string" } } } },
  run: (args) => ({ content: [{ type: "text", text: `echo: ${String(args.message)}` }] }),
};

/** A resolver from a table; each name may answer differently on each lookup (rebinding). */
function tableResolver(table: Record<string, string[]>): ResolveHost & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    const answers = table[hostname];
    if (!answers) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    const address = answers.length > 1 ? answers.shift()! : answers[0]!;
    return [{ address, family: address.includes(":") ? (6 as const) : (4 as const) }];
  };
  return Object.assign(resolve, { calls });
}

describe("upstream MCP servers: the address rule at connect time", () => {
  let upstream: Awaited<ReturnType<typeof serveScripted>>;
  let port: string;
  beforeAll(async () => {
    upstream = await serveScripted([echo]);
    port = new URL(upstream.url).port;
  });
  afterAll(async () => {
    await upstream.close();
  });

  it("a name that resolves to a public address at registration and to 127.0.0.1 at connect is refused at connect (DNS rebinding)", async () => {
    // First answer public (the registration check), every later one loopback.
    const resolver = tableResolver({ "mcp.rebinding.example": ["93.184.216.34", "127.0.0.1"] });
    const server = await startTestServer({ GATEWAY_MAX_RETRIES: "0" }, { resolveHost: resolver });
    try {
      const headers = bearer((await registerUser(server)).token);
      const before = upstream.sessions();
      const created = await server.request("/gateway/v1/mcp/servers", {
        method: "POST",
        headers,
        json: { name: "rebinding", url: `http://mcp.rebinding.example:${port}/mcp` },
      });
      expect(created.status).toBe(201);
      expect(created.body.health).toBe("unhealthy");
      expect(created.body.lastError).toContain("127.0.0.1");
      expect(created.body.lastError).toContain("loopback");
      expect(created.body.tools).toEqual([]);
      // The loopback server was never reached.
      expect(upstream.sessions()).toBe(before);
      expect(resolver.calls.length).toBeGreaterThanOrEqual(2);
      const tools = await server.request("/gateway/v1/mcp/tools", { headers });
      expect(tools.status).toBe(200);
      expect(tools.body.tools.some((tool: { name: string }) => tool.name.startsWith("rebinding__"))).toBe(false);
    } finally {
      await server.close();
    }
  });

  it("refuses a public-looking name that resolves to loopback at registration, without contacting it", async () => {
    const server = await startTestServer({}, { resolveHost: tableResolver({ "mcp.public.example": ["127.0.0.1"] }) });
    try {
      const headers = bearer((await registerUser(server)).token);
      const before = upstream.sessions();
      const refused = await server.request("/gateway/v1/mcp/servers", {
        method: "POST",
        headers,
        json: { name: "looks-public", url: `http://mcp.public.example:${port}/mcp` },
      });
      expect(refused.status).toBe(403);
      expect(refused.body.error.message).toContain("this deployment does not connect to MCP servers on private addresses");
      expect(upstream.sessions()).toBe(before);
    } finally {
      await server.close();
    }
  });

  describe("literal addresses", () => {
    let server: TestServer;
    let headers: Record<string, string>;
    beforeAll(async () => {
      server = await startTestServer();
      headers = bearer((await registerUser(server)).token);
    });
    afterAll(async () => {
      await server.close();
    });

    it.each([
      "[::127.0.0.1]",
      "[::ffff:0:7f00:1]",
      "[::ffff:7f00:1]",
      "[2002:7f00:1::1]",
      "[64:ff9b::7f00:1]",
      "[::1]",
      "127.1",
      "0x7f.0.0.1",
    ])("refuses %s at registration", async (host) => {
      const before = upstream.sessions();
      const refused = await server.request("/gateway/v1/mcp/servers", {
        method: "POST",
        headers,
        json: { name: "literal", url: `http://${host}:${port}/mcp` },
      });
      expect(refused.status).toBe(403);
      expect(upstream.sessions()).toBe(before);
    });
  });

  it("connects to exactly the address the resolver gave (the name is pinned, the Host header kept)", async () => {
    const resolver = tableResolver({ "mcp.pinned.example": ["127.0.0.1"] });
    const server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true" }, { resolveHost: resolver });
    try {
      const headers = bearer((await registerUser(server)).token);
      const created = await server.request("/gateway/v1/mcp/servers", {
        method: "POST",
        headers,
        json: { name: "pinned", url: `http://mcp.pinned.example:${port}/mcp` },
      });
      expect(created.body).toMatchObject({ health: "healthy", tools: ["pinned__echo"] });
      const call = await server.request("/gateway/v1/mcp/tools/execute?tool=pinned__echo", {
        method: "POST",
        headers,
        json: { args: { message: "hi" } },
      });
      expect(call.body.content).toEqual([{ type: "text", text: "echo: hi" }]);
      expect(resolver.calls).toContain("mcp.pinned.example");
    } finally {
      await server.close();
    }
  });

  it("does not contact a server stored while MCP_SERVERS_ALLOW_PRIVATE was on once it is off: unhealthy, with the reason", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gw-address-rule-"));
    let second: TestServer | undefined;
    try {
      const first = await startTestServer({ STORAGE: "fs", DATA_DIR: dir, MCP_SERVERS_ALLOW_PRIVATE: "true" });
      const user = await registerUser(first);
      const created = await first.request("/gateway/v1/mcp/servers", {
        method: "POST",
        headers: bearer(user.token),
        json: { name: "stored", url: upstream.url },
      });
      expect(created.body.health).toBe("healthy");
      await first.close();
      const sessions = upstream.sessions();

      second = await startTestServer({ STORAGE: "fs", DATA_DIR: dir, GATEWAY_MAX_RETRIES: "0" });
      const headers = bearer(user.token);
      const listed = await eventually(async () => {
        const res = await second!.request("/gateway/v1/mcp/servers", { headers });
        return res.body.servers[0]?.health === "unhealthy" ? res.body.servers[0] : undefined;
      });
      expect(listed.lastError).toContain("loopback");
      expect(listed.lastError).toContain("this deployment does not connect to MCP servers on private addresses");
      expect(upstream.sessions()).toBe(sessions);
      const call = await second.request("/gateway/v1/mcp/tools/execute?tool=stored__echo", {
        method: "POST",
        headers,
        json: { args: { message: "x" } },
      });
      expect(call.status).toBe(404);
    } finally {
      await second?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
