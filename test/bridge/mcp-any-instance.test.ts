import { afterAll, beforeAll, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CallToolResult, type ClientCapabilities, CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { serveEverything, type UpstreamMcp } from "../helpers/upstream.js";
import { TEST_JWT_SECRET, TEST_DATA_SECRET, newUserBody } from "../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { startInstance, type Instance } from "../helpers/instances.js";
import { roundRobinBalancer, type Balancer } from "../helpers/balancer.js";
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { CLIENTS_DIR, clientVersion, isolatedEnv, NODE24 } from "../helpers/clients.js";

/*
 * docs/mcp.md "Sessions on any instance": two instances on one Redis behind a plain
 * round-robin balancer (no stickiness); the official SDK client's requests alternate instances.
 */

const prefix = uniqueRedisPrefix();
let a: Instance;
let b: Instance;
let front: Balancer;
let everything: UpstreamMcp | undefined;
const clients: Client[] = [];

beforeAll(async () => {
  const env = {
    STORAGE: "redis",
    REDIS_PREFIX: prefix,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    LOG_LEVEL: "error",
    GATEWAY_RATE_LIMIT_RPM: "10000",
    MCP_SERVERS_ALLOW_PRIVATE: "true",
  };
  [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
  front = await roundRobinBalancer();
  front.targets = [a.origin, b.origin];
}, 60_000);
afterAll(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  await front?.close();
  await everything?.close();
  await Promise.all([a?.stop(), b?.stop()]);
  await dropRedisPrefix(prefix);
});

async function register(): Promise<string> {
  const registered = await fetch(`${front.origin}/gateway/v1/auth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(newUserBody()),
  });
  expect(registered.status).toBe(201);
  return ((await registered.json()) as { token: string }).token;
}

async function connect(
  token: string,
  capabilities: ClientCapabilities = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${front.origin}/bridge/mcp/`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "any-instance", version: "1.0.0" }, { capabilities });
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

/** A tools/list of session `sessionId` straight to one instance, with `token`. */
function listOn(origin: string, token: string, sessionId: string): Promise<Response> {
  return fetch(`${origin}/bridge/mcp/`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": sessionId,
      "mcp-protocol-version": "2025-11-25",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  });
}

const bridgeRequests = (origin: string) => front.served.get(origin)?.get("/bridge") ?? 0;

async function calculate(client: Client, expression: string): Promise<string> {
  const result = (await client.callTool({ name: "calculator", arguments: { expression } })) as CallToolResult;
  expect(result.isError).toBeFalsy();
  return (result.content[0] as { text: string }).text;
}

it("the SDK client connects through round-robin and its session's requests alternate instances", async () => {
  const token = await register();
  const beforeA = bridgeRequests(a.origin);
  const beforeB = bridgeRequests(b.origin);
  const { client, transport } = await connect(token);
  expect(transport.sessionId).toMatch(/^mcp1\./);
  for (let i = 0; i < 6; i += 1) {
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain("calculator");
    expect(await calculate(client, `${i} * 7`)).toContain(String(i * 7));
  }
  // initialize, notifications/initialized, the GET stream, 12 requests: both instances served the session.
  expect(bridgeRequests(a.origin) - beforeA).toBeGreaterThanOrEqual(6);
  expect(bridgeRequests(b.origin) - beforeB).toBeGreaterThanOrEqual(6);
  // Each instance answers the session directly too.
  for (const origin of [a.origin, b.origin]) expect((await listOn(origin, token, transport.sessionId!)).status).toBe(200);
});

it(`the MCP Inspector ${clientVersion("@modelcontextprotocol/inspector")} lists and calls tools through round-robin`, async () => {
  const token = await register();
  const home = await mkdtemp(join(tmpdir(), "mcp-inspector-"));
  const env = await isolatedEnv(home);
  const cli = join(CLIENTS_DIR, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
  const inspector = async (...args: string[]) => {
    const target = [`${front.origin}/bridge/mcp/`, "--transport", "http", "--header", `Authorization: Bearer ${token}`];
    const { stdout } = await promisify(execFile)(NODE24, [cli, "--cli", ...target, ...args], { env, cwd: home, timeout: 60_000 });
    return JSON.parse(stdout);
  };
  const beforeA = bridgeRequests(a.origin);
  const beforeB = bridgeRequests(b.origin);
  try {
    // Each run is a session of its own: initialize, notifications/initialized, the request, alternating instances.
    for (let i = 0; i < 2; i += 1) {
      const listed = await inspector("--method", "tools/list");
      expect(listed.tools.map((tool: { name: string }) => tool.name)).toContain("calculator");
      const called = await inspector("--method", "tools/call", "--tool-name", "calculator", "--tool-arg", `expression=${i}*7+1`);
      expect(called.isError ?? false).toBe(false);
      expect(JSON.stringify(called.content)).toContain(String(i * 7 + 1));
    }
  } finally {
    await rm(home, { recursive: true, force: true });
  }
  expect(bridgeRequests(a.origin) - beforeA).toBeGreaterThanOrEqual(4);
  expect(bridgeRequests(b.origin) - beforeB).toBeGreaterThanOrEqual(4);
}, 60_000);

it("another tenant's credential, a tampered id and a forged one get the 404 of an unknown session, on every instance", async () => {
  const owner = await register();
  const other = await register();
  const { client, transport } = await connect(owner);
  await client.listTools();
  const id = transport.sessionId!;
  // One character of the sealed claims changed.
  const at = id.length - 10;
  const tampered = id.slice(0, at) + (id[at] === "A" ? "B" : "A") + id.slice(at + 1);
  const answers: { status: number; body: unknown }[] = [];
  for (const origin of [a.origin, b.origin])
    for (const [token, sessionId] of [
      [other, id],
      [owner, tampered],
      [owner, `mcp1.${"x".repeat(80)}`],
      [owner, "00000000-0000-4000-8000-000000000000"],
    ] as const) {
      const response = await listOn(origin, token, sessionId);
      const body = (await response.json()) as { error?: { data?: { requestId?: string } } };
      // Each answer names its own request; everything else must be the same.
      delete body.error?.data?.requestId;
      answers.push({ status: response.status, body });
    }
  expect(answers).toHaveLength(8);
  for (const answer of answers) expect(answer).toEqual(answers[0]);
  expect(answers[0]!.status).toBe(404);
  expect((answers[0]!.body as { error: { code: number } }).error.code).toBe(-32004);
  // The owner's session is untouched by all that.
  expect((await listOn(a.origin, owner, id)).status).toBe(200);
});

it("a session deleted through one instance is refused by both afterwards", async () => {
  const token = await register();
  const { client, transport } = await connect(token);
  await client.listTools();
  const id = transport.sessionId!;
  // Both instances hold a copy of it now.
  for (const origin of [a.origin, b.origin]) expect((await listOn(origin, token, id)).status).toBe(200);
  await transport.terminateSession();
  for (const origin of [a.origin, b.origin]) expect((await listOn(origin, token, id)).status).toBe(404);
});

it("an upstream server's sampling request during a call is answered though the answer lands on the other instance", async () => {
  const token = await register();
  everything = await serveEverything();
  const registered = await fetch(`${front.origin}/gateway/v1/mcp/servers`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "everything", url: everything.url }),
  });
  expect(registered.status).toBe(201);
  const { client } = await connect(token, { sampling: {} });
  let asked = 0;
  client.setRequestHandler(CreateMessageRequestSchema, () => {
    asked += 1;
    return { role: "assistant", model: "test-model", content: { type: "text", text: "forty-two" } };
  });
  // The balancer alternates: each call's SSE answer is on one instance, the client's answer POSTed to the other.
  for (let i = 0; i < 2; i += 1) {
    const result = (await client.callTool({
      name: "everything__trigger-sampling-request",
      arguments: { prompt: "meaning of life", maxTokens: 12 },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect((result.content[0] as { text: string }).text).toContain("forty-two");
  }
  expect(asked).toBe(2);
}, 20_000);

it("an instance stopped mid-session: the client goes on through the other", async () => {
  const token = await register();
  const { client } = await connect(token);
  expect(await calculate(client, "1 + 1")).toContain("2");
  await calculate(client, "2 + 2");
  await a.stop();
  // The balancer's health check takes the stopped instance out.
  front.targets = [b.origin];
  const before = bridgeRequests(b.origin);
  for (let i = 0; i < 3; i += 1) expect(await calculate(client, `${i} + 10`)).toContain(String(i + 10));
  expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  expect(bridgeRequests(b.origin) - before).toBeGreaterThanOrEqual(4);
}, 20_000);
