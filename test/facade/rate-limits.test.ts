import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { platformAccount } from "../helpers/chat.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { connectStream } from "../helpers/agent-stream.js";

/**
 * GATEWAY_API_RATE_LIMIT_RPM (docs/rate-limits.md): every authenticated call on the Gateway
 * surface and `/rpc` counts against the credential's budget, shared by every instance on one
 * Redis; X-RateLimit-* on Gateway and bridge answers, never on the Platform.
 */

const RATE_HEADERS = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"];

describe("the Gateway API budget", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ GATEWAY_API_RATE_LIMIT_RPM: "3", GATEWAY_RATE_LIMIT_RPM: "5" });
  });
  afterAll(async () => {
    await server.close();
  });

  it("admits a credential's first calls with X-RateLimit-*, then answers 429 with Retry-After in the Gateway's envelope", async () => {
    const user = await registerUser(server);
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await server.request("/gateway/v1/auth/me", { headers: bearer(user.token) });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit")).toBe("3");
      expect(Number(res.headers.get("x-ratelimit-reset"))).toBeGreaterThan(0);
      expect(Number(res.headers.get("x-ratelimit-reset"))).toBeLessThanOrEqual(60);
      remaining.push(Number(res.headers.get("x-ratelimit-remaining")));
    }
    expect(remaining).toEqual([2, 1, 0]);

    const refused = await server.request("/gateway/v1/workspaces", { headers: bearer(user.token) });
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get("x-ratelimit-limit")).toBe("3");
    expect(refused.headers.get("x-ratelimit-remaining")).toBe("0");
    expect(refused.body).toEqual({
      error: {
        code: "RATE_LIMITED",
        message: expect.stringMatching(/3 Gateway API requests per minute/),
        requestId: refused.headers.get("x-request-id"),
        details: { limit: 3, windowSeconds: 60, retryAfterSeconds: retryAfter, budget: "gateway" },
      },
    });

    // The same budget by name over JSON-RPC: no way around it through another transport.
    const rpc = await server.request("/rpc", {
      method: "POST",
      headers: bearer(user.token),
      json: { jsonrpc: "2.0", id: 1, method: "auth.me" },
    });
    expect(rpc.status).toBe(200);
    expect(rpc.body.error).toMatchObject({ code: -32029, data: { code: "RATE_LIMITED", status: 429 } });
  });

  it("counts per credential: another user, and each gateway key, has a budget of its own; public routes count for nobody", async () => {
    const alice = await registerUser(server);
    const key = await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(alice.token), json: { name: "ci" } });
    expect(key.status).toBe(201);
    // alice's session has used one call (creating the key); her key has its own three.
    for (let i = 0; i < 3; i++)
      expect((await server.request("/gateway/v1/auth/me", { headers: { "x-api-key": key.body.key } })).status).toBe(200);
    expect((await server.request("/gateway/v1/auth/me", { headers: { "x-api-key": key.body.key } })).status).toBe(429);
    expect((await server.request("/gateway/v1/auth/me", { headers: bearer(alice.token) })).status).toBe(200);
    // Sign-in is public: it has its own throttle (failures per email), not this budget.
    for (let i = 0; i < 4; i++) {
      const login = await server.request("/gateway/v1/auth/login", {
        method: "POST",
        json: { email: alice.email, password: alice.password },
      });
      expect(login.status).toBe(200);
      expect(login.headers.get("x-ratelimit-limit")).toBeNull();
    }
  });

  it("sends X-RateLimit-* on Gateway and bridge answers, the bridge's budget for the bridge's methods, and none on the Platform", async () => {
    const user = await registerUser(server);
    const gateway = await server.request("/gateway/v1/auth/me", { headers: bearer(user.token) });
    expect(gateway.headers.get("x-ratelimit-limit")).toBe("3");
    // mcp.tools.list declares the bridge's budget (GATEWAY_RATE_LIMIT_RPM), on both surfaces.
    for (const path of ["/gateway/v1/mcp/tools", "/bridge/v1/mcp/tools"]) {
      const bridge = await server.request(path, { headers: bearer(user.token) });
      expect(bridge.status).toBe(200);
      expect(bridge.headers.get("x-ratelimit-limit")).toBe("5");
      for (const name of RATE_HEADERS) expect(bridge.headers.get(name)).not.toBeNull();
    }
    const account = await platformAccount(server);
    for (let i = 0; i < 5; i++) {
      const platform = await server.request("/api/v1/models", { headers: bearer(account.key) });
      expect(platform.status).toBe(200);
      expect(
        [...platform.headers.keys()].filter((name) => name.startsWith("x-ratelimit") || name === "x-request-id" || name === "retry-after"),
      ).toEqual([]);
    }
  });
});

describe("the Gateway API budget across two instances on one Redis", () => {
  const prefix = uniqueRedisPrefix();
  let one: TestServer;
  let two: TestServer;
  beforeAll(async () => {
    const env = { STORAGE: "redis", REDIS_PREFIX: prefix, GATEWAY_API_RATE_LIMIT_RPM: "4" };
    [one, two] = await Promise.all([startTestServer(env), startTestServer(env)]);
  });
  afterAll(async () => {
    for (const server of [one, two]) await server.close();
    await dropRedisPrefix(prefix);
  });

  it("shares one budget per credential: calls on either instance count, and both refuse past it", async () => {
    const user = await registerUser(one);
    const remaining: string[] = [];
    for (const server of [one, two, one, two]) {
      const res = await server.request("/gateway/v1/auth/me", { headers: bearer(user.token) });
      expect(res.status).toBe(200);
      remaining.push(res.headers.get("x-ratelimit-remaining")!);
    }
    expect(remaining).toEqual(["3", "2", "1", "0"]);
    for (const server of [one, two]) {
      const refused = await server.request("/gateway/v1/auth/me", { headers: bearer(user.token) });
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe("RATE_LIMITED");
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    }
  });
});

describe("gateway_dispatcher_calls_total", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  async function scrape(): Promise<string> {
    return (await fetch(server.url("/metrics"))).text();
  }

  function count(text: string, labels: Record<string, string>): number {
    const wanted = Object.entries(labels).map(([name, value]) => `${name}="${value}"`);
    const line = text
      .split("\n")
      .find((row) => row.startsWith("gateway_dispatcher_calls_total{") && wanted.every((label) => row.includes(label)));
    return line ? Number(line.split(" ").at(-1)) : 0;
  }

  it("counts calls from REST, /rpc, MCP and sockets alike, by method, surface, transport and outcome, and logs each", async () => {
    const user = await registerUser(server);
    // One method over two transports: REST and JSON-RPC.
    expect((await server.request("/gateway/v1/mcp/tools", { headers: bearer(user.token) })).status).toBe(200);
    const rpc = await server.request("/rpc", {
      method: "POST",
      headers: bearer(user.token),
      json: { jsonrpc: "2.0", id: 1, method: "mcp.tools.list" },
    });
    expect(rpc.body.error).toBeUndefined();
    expect(rpc.body.result).toBeDefined();
    // A REST refusal is counted with its error code.
    expect((await server.request("/gateway/v1/auth/me", { headers: bearer("not-a-token") })).status).toBe(401);

    // An MCP session's inner calls: its gate, tools/list and tools/call.
    const client = new Client({ name: "metrics-test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(user.token) } }),
    );
    try {
      await client.listTools();
      const result = await client.callTool({ name: "calculator", arguments: { expression: "6*7" } });
      expect(result.isError).toBeFalsy();
    } finally {
      await client.close();
    }

    // One method over REST and the agent stream's socket: agents.cancel of a run that does not exist.
    const restCancel = await server.request("/gateway/v1/agents/runs/run_missing/cancel", { method: "POST", headers: bearer(user.token) });
    const stream = await connectStream(server.origin, { token: user.token });
    try {
      stream.send({ type: "cancel", runId: "run_missing" });
      const frame = await stream.waitFor((received) => received.type === "error");
      expect(frame.code).toBe(restCancel.body.error.code);
    } finally {
      await stream.close();
    }

    const text = await scrape();
    expect(count(text, { method: "agents.cancel", surface: "gateway", transport: "rest", outcome: restCancel.body.error.code })).toBe(1);
    expect(count(text, { method: "agents.cancel", surface: "gateway", transport: "socket", outcome: restCancel.body.error.code })).toBe(1);
    expect(count(text, { method: "agents.stream.connect", surface: "gateway", transport: "socket", outcome: "ok" })).toBe(1);
    expect(count(text, { method: "mcp.tools.list", surface: "gateway", transport: "rest", outcome: "ok" })).toBe(1);
    expect(count(text, { method: "mcp.tools.list", surface: "rpc", transport: "rpc", outcome: "ok" })).toBe(1);
    expect(count(text, { method: "auth.me", surface: "gateway", transport: "rest", outcome: "UNAUTHORIZED" })).toBe(1);
    expect(count(text, { method: "bridge.mcp.connect", surface: "bridge", transport: "mcp", outcome: "ok" })).toBeGreaterThanOrEqual(3);
    expect(count(text, { method: "bridge.mcp.tools.list", surface: "bridge", transport: "mcp", outcome: "ok" })).toBe(1);
    expect(count(text, { method: "bridge.mcp.tools.call", surface: "bridge", transport: "mcp", outcome: "ok" })).toBe(1);
    expect(text).toMatch(
      /gateway_dispatcher_call_duration_seconds_count\{method="bridge\.mcp\.tools\.call",surface="bridge",transport="mcp",outcome="ok"\} 1/,
    );

    // The log: the REST call in its request's line; the MCP inner call in a line of its own.
    const logs = server.logs();
    const restLine = logs.find((line) => line.path === "/gateway/v1/mcp/tools");
    expect(restLine).toMatchObject({
      operation: "mcp.tools.list",
      principal: { kind: "session", userId: user.user.id },
      calls: [{ method: "mcp.tools.list", outcome: "ok", durationMs: expect.any(Number) }],
    });
    const toolCall = logs.find((line) => line.event === "call" && line.method === "bridge.mcp.tools.call");
    expect(toolCall).toMatchObject({
      surface: "bridge",
      transport: "mcp",
      outcome: "ok",
      principal: { kind: "session", userId: user.user.id },
      durationMs: expect.any(Number),
    });
  });
});
