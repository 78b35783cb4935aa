import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { connectVm, vmSocketUrl, type TestVm } from "../../helpers/vm.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * Bounded input from VMs (docs/security.md "Input bounds"): a schema deeper than 32 levels or
 * larger than 64 KiB, or more than 1,000 tools, is refused with a JSON-RPC error to that VM,
 * and listing keeps answering for everyone.
 */

const SERVICE_KEY = "service-key-for-bounds-tests-0123456789";

/** A JSON Schema nested `depth` levels, written as text (a deep object would overflow JSON.stringify). */
function deepSchemaText(depth: number): string {
  return `${'{"type":"object","properties":{"x":'.repeat(depth)}{"type":"string"}${"}}".repeat(depth)}`;
}

/** Sends a raw tools/register frame and waits for its reply. */
async function registerRaw(
  vm: TestVm,
  id: number,
  toolsJson: string,
): Promise<{ result?: unknown; error?: { code: number; message: string } }> {
  const from = vm.frames.length;
  vm.ws.send(`{"jsonrpc":"2.0","id":${id},"method":"tools/register","params":{"tools":${toolsJson}}}`);
  return eventually(() => {
    for (const frame of vm.frames.slice(from)) {
      const message = JSON.parse(frame);
      if (message.id === id) return message;
    }
    return undefined;
  });
}

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

describe("VM tools/register bounds", () => {
  let server: TestServer;
  let token: string;
  let vm: TestVm;
  let url: string;

  beforeAll(async () => {
    server = await startTestServer({ PLATFORM_SERVICE_KEY: SERVICE_KEY, GATEWAY_RATE_LIMIT_RPM: "10000" });
    token = (await registerUser(server)).token;
    url = vmSocketUrl(server.origin, "agent-1", { vmId: "bounded-vm" });
    vm = await connectVm(url, token);
  });
  afterAll(async () => {
    await vm.close();
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  async function listEverywhere() {
    const rest = await timed(() => server.request("/bridge/v1/mcp/tools", { headers: bearer(token) }));
    expect(rest.value.status).toBe(200);
    expect(rest.ms).toBeLessThan(2000);
    for (const credential of [token, SERVICE_KEY]) {
      const client = new Client({ name: "bounds-test", version: "1.0.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(credential) } }),
      );
      try {
        const listed = await timed(() => client.listTools(undefined, { timeout: 3000 }));
        expect(listed.value.tools.length).toBeGreaterThan(0);
      } finally {
        await client.close();
      }
    }
    return rest.value.body.tools.map((tool: { name: string }) => tool.name) as string[];
  }

  it("refuses a 10,000-level schema with a JSON-RPC error; listing still answers 200 for the owner and MCP tools/list for the owner and the service key", async () => {
    const reply = await registerRaw(vm, 9001, `[{"name":"deep","inputSchema":${deepSchemaText(10_000)}}]`);
    expect(reply.error?.code).toBe(-32602);
    expect(reply.error?.message).toBe("Invalid tools/register params: tools.0: tool deep: inputSchema is deeper than 32 levels");
    const names = await listEverywhere();
    expect(names.some((name) => name.endsWith("__deep"))).toBe(false);
  });

  it("refuses a schema of 33 levels, accepts one of exactly 32", async () => {
    // deepSchemaText(n) has 2n+1 levels of objects: n schemas and n `properties` maps.
    const tooDeep = await registerRaw(vm, 9002, `[{"name":"deepish","inputSchema":${deepSchemaText(16)}}]`);
    expect(tooDeep.error?.message).toMatch(/deeper than 32 levels/);
    // 15 nested schemas (31 levels) whose innermost holds an enum array: level 32.
    const fits = await registerRaw(
      vm,
      9003,
      `[{"name":"fits","inputSchema":${deepSchemaText(15).replace('{"type":"string"}', '{"type":"string","enum":["a"]}')}}]`,
    );
    expect(fits.error).toBeUndefined();
    await eventually(async () => (await listEverywhere()).includes("vm__bounded-vm__fits"));
  });

  it("refuses a schema larger than 64 KiB", async () => {
    const properties = Object.fromEntries(
      Array.from({ length: 2000 }, (_, i) => [`field_${i}`, { type: "string", description: "x".repeat(30) }]),
    );
    const reply = await registerRaw(vm, 9004, JSON.stringify([{ name: "wide", inputSchema: { type: "object", properties } }]));
    expect(reply.error?.code).toBe(-32602);
    expect(reply.error?.message).toMatch(/larger than 64 KiB/);
  });

  it("refuses more than 1,000 tools, accepts 1,000", async () => {
    const tools = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ name: `t${i}` })));
    const refused = await registerRaw(vm, 9005, tools(1001));
    expect(refused.error?.code).toBe(-32602);
    expect(refused.error?.message).toMatch(/at most 1000 tools/);
    const accepted = await registerRaw(vm, 9006, tools(1000));
    expect((accepted.result as { tools: string[] }).tools).toHaveLength(1000);
    await eventually(async () => (await listEverywhere()).filter((name) => name.startsWith("vm__bounded-vm__")).length === 1000);
  });
});
