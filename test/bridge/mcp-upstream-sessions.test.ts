import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  CreateMessageRequestSchema,
  CreateMessageResultSchema,
  ElicitRequestSchema,
  ElicitResultSchema,
  ListRootsRequestSchema,
  ListRootsResultSchema,
  ListToolsRequestSchema,
  LoggingMessageNotificationSchema,
  RootsListChangedNotificationSchema,
  SetLevelRequestSchema,
  type CallToolResult,
  type LoggingMessageNotification,
} from "@modelcontextprotocol/sdk/types.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { serveMcp, type UpstreamMcp } from "../helpers/upstream.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { eventually } from "../helpers/eventually.js";

/** What the test upstream saw of one of its sessions: who it is, and every answer it got. */
interface Seen {
  client: string;
  capabilities: Record<string, unknown>;
  answers: { method: string; related: boolean; answer: string }[];
  levels: string[];
  /** The session was ended (DELETE). */
  closed: boolean;
}

/**
 * A real MCP server (SDK, loopback) that asks its client everything a server may, about the
 * client it was told it serves (`clientInfo.name`):
 * - `roots/list` right after initialize and on `notifications/roots/list_changed` (unrelated);
 * - in `probe`, sampling, elicitation and roots related to the call and the same unrelated
 *   (on its GET stream), then once more after the call answered (`later`: between calls).
 */
function prober(seen: Seen[]): Promise<UpstreamMcp> {
  return serveMcp(() => {
    const server = new Server({ name: "prober", version: "1.0.0" }, { capabilities: { tools: {}, logging: {} } });
    const me: Seen = { client: "", capabilities: {}, answers: [], levels: [], closed: false };
    seen.push(me);
    server.onclose = () => {
      me.closed = true;
    };
    const ask = async (related: boolean, sendRequest: (request: never, schema: never) => Promise<unknown>) => {
      const who = me.client;
      const requests = [
        [
          {
            method: "sampling/createMessage",
            params: { messages: [{ role: "user", content: { type: "text", text: `for ${who}` } }], maxTokens: 5 },
          },
          CreateMessageResultSchema,
        ],
        [
          {
            method: "elicitation/create",
            params: { message: `for ${who}`, requestedSchema: { type: "object", properties: { who: { type: "string" } } } },
          },
          ElicitResultSchema,
        ],
        [{ method: "roots/list" }, ListRootsResultSchema],
      ] as const;
      for (const [request, schema] of requests) {
        const answer = await sendRequest(request as never, schema as never);
        me.answers.push({ method: request.method, related, answer: JSON.stringify(answer) });
      }
    };
    const unrelated = (request: never, schema: never) => server.request(request, schema);
    server.oninitialized = () => {
      me.client = server.getClientVersion()?.name ?? "";
      me.capabilities = server.getClientCapabilities() ?? {};
      // Once the client's GET stream had time to open (a request sent before is lost, as with any client).
      setTimeout(() => {
        void server.listRoots().then(
          (answer) => me.answers.push({ method: "roots/list", related: false, answer: JSON.stringify(answer) }),
          () => undefined,
        );
      }, 200);
    };
    server.setNotificationHandler(RootsListChangedNotificationSchema, async () => {
      const answer = await server.listRoots();
      me.answers.push({ method: "roots/list (changed)", related: false, answer: JSON.stringify(answer) });
    });
    server.setRequestHandler(SetLevelRequestSchema, (request) => {
      me.levels.push(request.params.level);
      return {};
    });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [
        { name: "probe", description: "asks the client, related and not", inputSchema: { type: "object" as const } },
        { name: "later", description: "asks the client after answering", inputSchema: { type: "object" as const } },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      if (request.params.name === "later") {
        setTimeout(() => void ask(false, unrelated).catch(() => undefined), 50);
        return { content: [{ type: "text", text: "asking later" }] };
      }
      await server.sendLoggingMessage({ level: "info", logger: "probe", data: `probing ${me.client}` });
      await ask(true, (req, schema) => extra.sendRequest(req, schema));
      await ask(false, unrelated);
      return { content: [{ type: "text", text: `probed ${me.client}` }] };
    });
    return server;
  });
}

/** A client that answers everything with its own name, and records what it was asked. */
async function capableClient(origin: string, path: string, token: string, name: string) {
  const client = new Client(
    { name, version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );
  const asked: string[] = [];
  const logs: LoggingMessageNotification["params"][] = [];
  client.setRequestHandler(CreateMessageRequestSchema, (request) => {
    asked.push(`sampling ${(request.params.messages[0]!.content as { text: string }).text}`);
    return { role: "assistant", model: name, content: { type: "text", text: `sampled by ${name}` } };
  });
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    asked.push(`elicitation ${request.params.message}`);
    return { action: "accept", content: { who: name } };
  });
  client.setRequestHandler(ListRootsRequestSchema, () => {
    asked.push("roots");
    return { roots: [{ uri: `file:///${name}`, name }] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void logs.push(notification.params));
  await client.connect(new StreamableHTTPClientTransport(new URL(origin + path), { requestInit: { headers: bearer(token) } }));
  return { client, asked, logs, name };
}

type Capable = Awaited<ReturnType<typeof capableClient>>;

/** Every answer the upstream got on `name`'s upstream session came from `name`, and nothing else did. */
function expectIsolated(seen: Seen[], clients: Capable[]) {
  for (const { name, asked } of clients) {
    const mine = seen.filter((session) => session.client === name);
    expect(mine).toHaveLength(1);
    const [session] = mine;
    expect(session!.capabilities).toMatchObject({ sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } });
    for (const other of clients.filter((client) => client.name !== name)) {
      for (const answer of session!.answers) expect(answer.answer).not.toContain(other.name);
      for (const question of asked) expect(question).not.toContain(other.name);
    }
    for (const answer of session!.answers) expect(answer.answer).toContain(name);
    // Each client was asked only about itself.
    for (const question of asked.filter((line) => line !== "roots")) expect(question).toContain(`for ${name}`);
  }
}

/** Runs both clients' probes at once and checks each got (only) its own requests. */
async function probeBoth(seen: Seen[], clients: Capable[], prefix: string) {
  const results = (await Promise.all(
    clients.map(({ client }) => client.callTool({ name: `${prefix}probe`, arguments: {} })),
  )) as CallToolResult[];
  results.forEach((result, index) => {
    expect(result.isError).toBeFalsy();
    expect(result.content).toEqual([{ type: "text", text: `probed ${clients[index]!.name}` }]);
  });
  for (const { name } of clients) {
    const session = seen.find((candidate) => candidate.client === name)!;
    // Sampling, elicitation and roots, related and unrelated, plus the roots/list after initialize.
    await eventually(() => session.answers.length >= 7).catch((error) => {
      throw new Error(`${name}: ${JSON.stringify(session.answers)} ${error}`);
    });
    for (const related of [true, false]) {
      for (const method of ["sampling/createMessage", "elicitation/create", "roots/list"]) {
        expect(session.answers.some((answer) => answer.method === method && answer.related === related)).toBe(true);
      }
    }
  }
  // Between calls: the server asks again after a call answered.
  await Promise.all(clients.map(({ client }) => client.callTool({ name: `${prefix}later`, arguments: {} })));
  for (const { name } of clients) {
    const session = seen.find((candidate) => candidate.client === name)!;
    await eventually(() => session.answers.length >= 10).catch((error) => {
      throw new Error(`${name}: ${JSON.stringify(session.answers)} ${error}`);
    });
  }
  // A client's roots changing reaches its upstream session, which asks it again.
  await Promise.all(clients.map(({ client }) => client.sendRootsListChanged()));
  for (const { name } of clients) {
    const session = seen.find((candidate) => candidate.client === name)!;
    await eventually(() => session.answers.some((answer) => answer.method === "roots/list (changed)"));
  }
  expectIsolated(seen, clients);
}

describe("MCP: upstream sessions that follow the client's (one instance)", () => {
  let server: TestServer;
  let upstream: UpstreamMcp;
  const seen: Seen[] = [];
  let alice: string;
  let bob: string;
  const open: Client[] = [];

  beforeAll(async () => {
    upstream = await prober(seen);
    server = await startTestServer({
      MCP_SERVERS_ALLOW_PRIVATE: "true",
      GATEWAY_RATE_LIMIT_RPM: "100000",
      MCP_UPSTREAM_SESSIONS_PER_USER: "3",
    });
    alice = (await registerUser(server)).token;
    bob = (await registerUser(server)).token;
    // Shared by the operators: one connection serves both tenants' plain clients.
    const repo = server.bridge.upstream.repo;
    await repo.create({
      name: "prober",
      url: upstream.url,
      headers: {},
      category: "mcp",
      createdBy: "operator",
      tenantId: null,
      createdAt: new Date().toISOString(),
    });
    await repo.announce({ op: "added", tenantId: null, name: "prober", from: "operator" });
    await eventually(async () =>
      (await server.request("/gateway/v1/mcp/tools", { headers: bearer(alice) })).body.tools.some(
        (tool: { name: string }) => tool.name === "prober__probe",
      ),
    );
  });
  afterAll(async () => {
    await Promise.all(open.map((client) => client.close().catch(() => undefined)));
    await server.close();
    await upstream.close();
  });

  it("gives each capable client its own upstream session on the server's endpoint; every request reaches only its client", async () => {
    const before = seen.length;
    const clients = [
      await capableClient(server.origin, "/bridge/mcp/servers/prober/", alice, "alice-app"),
      await capableClient(server.origin, "/bridge/mcp/servers/prober/", bob, "bob-app"),
    ];
    open.push(...clients.map(({ client }) => client));
    await probeBoth(seen, clients, "");
    // Two upstream sessions of their own, besides the shared connection opened at registration.
    expect(seen.length - before).toBe(2);
    expect(server.bridge.upstream.ownSessions).toBe(2);
    // Log messages of a client's upstream session reach that client only.
    await eventually(() =>
      clients.every(({ logs }) => logs.some((log) => log.data === `probing ${clients.find((c) => c.logs === logs)!.name}`)),
    );
    for (const { logs, name } of clients)
      expect(logs.filter((log) => String(log.data).startsWith("probing ")).map((log) => log.data)).toEqual([`probing ${name}`]);
    expect(clients[0]!.logs.find((log) => log.data === "probing alice-app")?.logger).toBe("probe");
  });

  it("does the same on the catalog endpoint for that server's tools, and forwards logging/setLevel", async () => {
    const clients = [
      await capableClient(server.origin, "/bridge/mcp/", alice, "alice-catalog"),
      await capableClient(server.origin, "/bridge/mcp/", bob, "bob-catalog"),
    ];
    open.push(...clients.map(({ client }) => client));
    await clients[0]!.client.setLoggingLevel("warning");
    await probeBoth(seen, clients, "prober__");
    expect(seen.find((session) => session.client === "alice-catalog")!.levels).toContain("warning");
    // Named as the catalog names loggers; bob (no level set) hears his own only.
    await eventually(() => clients[1]!.logs.some((log) => log.data === "probing bob-catalog"));
    expect(clients[1]!.logs.find((log) => log.data === "probing bob-catalog")?.logger).toBe("prober/probe");
    expect(clients[0]!.logs.some((log) => log.data === "probing alice-catalog")).toBe(false);
  });

  it("closes a client's upstream session when its session ends, and bounds them per user", async () => {
    const sessions = server.bridge.upstream.ownSessions;
    const client = await capableClient(server.origin, "/bridge/mcp/servers/prober/", alice, "alice-short");
    await client.client.callTool({ name: "probe", arguments: {} });
    expect(server.bridge.upstream.ownSessions).toBe(sessions + 1);
    await (client.client.transport as StreamableHTTPClientTransport).terminateSession();
    await client.client.close();
    await eventually(() => server.bridge.upstream.ownSessions === sessions);
    // Its upstream session was ended (DELETE) at the server too.
    await eventually(() => seen.find((session) => session.client === "alice-short")?.closed === true);
    // alice holds three (MCP_UPSTREAM_SESSIONS_PER_USER=3) once this one has its own: a fourth capable session uses the shared connection.
    const third = await capableClient(server.origin, "/bridge/mcp/servers/prober/", alice, "alice-third");
    open.push(third.client);
    await third.client.callTool({ name: "later", arguments: {} });
    expect(server.bridge.upstream.ownSessions).toBe(sessions + 1);
    const fourth = await capableClient(server.origin, "/bridge/mcp/servers/prober/", alice, "alice-fourth");
    open.push(fourth.client);
    const before = seen.length;
    const result = (await fourth.client.callTool({ name: "probe", arguments: {} })) as CallToolResult;
    expect(seen.length).toBe(before);
    expect(server.bridge.upstream.ownSessions).toBe(sessions + 1);
    // Bob is not bound by alice's sessions.
    const bobs = await capableClient(server.origin, "/bridge/mcp/servers/prober/", bob, "bob-more");
    open.push(bobs.client);
    await bobs.client.callTool({ name: "later", arguments: {} });
    expect(server.bridge.upstream.ownSessions).toBe(sessions + 2);
    // On the shared connection a related request still reaches the caller; an unrelated one is refused.
    expect(fourth.asked.some((line) => line.startsWith("sampling"))).toBe(true);
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain("relayed only during a tools/call");
  });
});

describe("MCP: upstream sessions across two instances on Redis", () => {
  const prefix = uniqueRedisPrefix();
  const env = { STORAGE: "redis", REDIS_PREFIX: prefix, MCP_SERVERS_ALLOW_PRIVATE: "true", GATEWAY_RATE_LIMIT_RPM: "100000" };
  let a: TestServer;
  let b: TestServer;
  let upstream: UpstreamMcp;
  const seen: Seen[] = [];
  const open: Client[] = [];

  beforeAll(async () => {
    upstream = await prober(seen);
    [a, b] = await Promise.all([startTestServer(env), startTestServer(env)]);
    const repo = a.bridge.upstream.repo;
    await repo.create({
      name: "prober",
      url: upstream.url,
      headers: {},
      category: "mcp",
      createdBy: "operator",
      tenantId: null,
      createdAt: new Date().toISOString(),
    });
    await repo.announce({ op: "added", tenantId: null, name: "prober", from: "operator" });
  });
  afterAll(async () => {
    await Promise.all(open.map((client) => client.close().catch(() => undefined)));
    await Promise.all([a?.close(), b?.close()]);
    await upstream.close();
    await dropRedisPrefix(prefix);
  });

  it("a client on each instance, of two tenants, at once: each request reaches only its own client", async () => {
    const alice = (await registerUser(a)).token;
    const bob = (await registerUser(b)).token;
    for (const [instance, token] of [
      [a, alice],
      [b, bob],
    ] as const) {
      await eventually(
        async () =>
          (await instance.request("/gateway/v1/mcp/tools", { headers: bearer(token) })).body.tools.some(
            (tool: { name: string }) => tool.name === "prober__probe",
          ),
        10_000,
      );
    }
    const clients = [
      await capableClient(a.origin, "/bridge/mcp/servers/prober/", alice, "alice-on-a"),
      await capableClient(b.origin, "/bridge/mcp/servers/prober/", bob, "bob-on-b"),
    ];
    open.push(...clients.map(({ client }) => client));
    await probeBoth(seen, clients, "");
    expect(a.bridge.upstream.ownSessions).toBe(1);
    expect(b.bridge.upstream.ownSessions).toBe(1);
  });
});
