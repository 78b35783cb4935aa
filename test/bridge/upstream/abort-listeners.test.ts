import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { serveScripted } from "../../helpers/upstream.js";

/**
 * Upstream MCP calls must not pile listeners on a long-lived abort signal (each call adding one
 * that is never removed makes every later call walk the list, and Node warns past 10).
 */
describe("upstream MCP calls and abort listeners", () => {
  let server: TestServer;
  let upstream: Awaited<ReturnType<typeof serveScripted>>;
  let token: string;
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => {
    if (warning.name === "MaxListenersExceededWarning") warnings.push(warning);
  };

  beforeAll(async () => {
    process.on("warning", onWarning);
    upstream = await serveScripted([
      {
        tool: { name: "ping", description: "pong", inputSchema: { type: "object" } },
        run: () => ({ content: [{ type: "text", text: "pong" }] }),
      },
    ]);
    server = await startTestServer({
      MCP_SERVERS_ALLOW_PRIVATE: "true",
      GATEWAY_RATE_LIMIT_RPM: "1000000",
      GATEWAY_API_RATE_LIMIT_RPM: "1000000",
    });
    token = (await registerUser(server)).token;
    expect(
      (await server.request("/gateway/v1/mcp/servers", { method: "POST", headers: bearer(token), json: { name: "up", url: upstream.url } }))
        .status,
    ).toBe(201);
  });
  afterAll(async () => {
    process.off("warning", onWarning);
    await server.close();
    await upstream.close();
  });

  it("makes 500 calls through an MCP session, 8 at a time, without a MaxListenersExceededWarning", async () => {
    const client = new Client({ name: "listeners", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(token) } }),
    );
    try {
      for (let round = 0; round < 500 / 8; round += 1) {
        const results = await Promise.all(Array.from({ length: 8 }, () => client.callTool({ name: "up__ping", arguments: {} })));
        for (const result of results) expect(result.isError).toBeFalsy();
      }
    } finally {
      await client.close();
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.map((warning) => warning.message)).toEqual([]);
  });

  it("makes 500 calls over REST, 8 at a time, without a MaxListenersExceededWarning", async () => {
    const call = () =>
      server.request("/gateway/v1/mcp/tools/execute?tool=up__ping", { method: "POST", headers: bearer(token), json: { args: {} } });
    for (let round = 0; round < 500 / 8; round += 1) {
      const answers = await Promise.all(Array.from({ length: 8 }, call));
      for (const answer of answers) expect(answer.status).toBe(200);
    }
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.map((warning) => warning.message)).toEqual([]);
  });
});
