import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { McpSessions, type McpSession } from "../../bridge/mcp/sessions.js";
import { Catalog } from "../../bridge/catalog.js";
import { mcpSessionsOf } from "../../bridge/mcp/endpoint.js";
import { MemoryBus } from "../../storage/bus.js";
import { eventually } from "../helpers/eventually.js";

/** Issue 9 item 12: at most MCP_MAX_SESSIONS_PER_USER sessions per user; past it the least recently used one ends. */

describe("McpSessions cap", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const fake = (id: string, userId: string): McpSession & { closed: () => boolean } => {
    let closed = false;
    return {
      id,
      claims: {
        nonce: id,
        userId,
        protocolVersion: "2025-11-25",
        capabilities: {},
        clientInfo: { name: "c", version: "0" },
        expiresAt: 1e10,
      },
      userId,
      principal: { kind: "session", userId, scopes: ["*"] },
      requestId: `req-${id}`,
      scope: { tenantId: "ten_test" },
      server: { close: async () => void (closed = true), sendToolListChanged: async () => undefined } as never,
      transport: {} as never,
      lastSeen: Date.now(),
      streamOpen: true,
      pendingListChanged: false,
      closed: () => closed,
    };
  };

  it("ends the user's least recently used session, never another user's", async () => {
    vi.useFakeTimers({ now: 0 });
    const sessions = new McpSessions(new Catalog(), 1800, 2);
    const s1 = fake("s1", "alice");
    sessions.add(s1);
    vi.advanceTimersByTime(1000);
    const s2 = fake("s2", "alice");
    sessions.add(s2);
    const other = fake("o1", "bob");
    sessions.add(other);
    vi.advanceTimersByTime(1000);
    s1.lastSeen = Date.now(); // s1 answered a request: s2 is now the least recently used
    vi.advanceTimersByTime(1000);
    const s3 = fake("s3", "alice");
    sessions.add(s3);
    await vi.runOnlyPendingTimersAsync();
    expect(sessions.get("s2")).toBeUndefined();
    expect(s2.closed()).toBe(true);
    expect([sessions.get("s1"), sessions.get("s3"), sessions.get("o1")].every(Boolean)).toBe(true);
    expect(sessions.size).toBe(3);
    await sessions.close();
  });
});

describe("notifications of a session whose stream another instance holds", () => {
  /** One session's copy on one instance: its server records the notifications it sends. */
  const copy = (userId: string) => {
    const sent: unknown[] = [];
    const session: McpSession = {
      id: "mcp1.same-session",
      claims: {
        nonce: "n-1",
        userId,
        protocolVersion: "2025-11-25",
        capabilities: {},
        clientInfo: { name: "c", version: "0" },
        expiresAt: 1e10,
      },
      userId,
      principal: { kind: "session", userId, scopes: ["*"] },
      requestId: "req",
      scope: { tenantId: "ten_a" },
      server: {
        close: async () => undefined,
        notification: async (notification: unknown) => void sent.push(notification),
        sendResourceUpdated: async (params: unknown) => void sent.push({ method: "notifications/resources/updated", params }),
      } as never,
      transport: {} as never,
      lastSeen: Date.now(),
      streamOpen: false,
      pendingListChanged: false,
    };
    return { session, sent };
  };

  it("go over the bus to the instance holding the GET stream, and stop when it closes", async () => {
    const bus = new MemoryBus();
    const here = new McpSessions(
      new Catalog(),
      1800,
      100,
      () => undefined,
      () => undefined,
      bus,
    );
    const there = new McpSessions(
      new Catalog(),
      1800,
      100,
      () => undefined,
      () => undefined,
      bus,
    );
    const local = copy("alice");
    const holder = copy("alice");
    here.add(local.session);
    there.add(holder.session);
    there.streamOpened(holder.session);
    const log = { method: "notifications/message" as const, params: { level: "info" as const, data: "from here" } };
    // The subscription is live once a message published after it arrives.
    await eventually(async () => {
      here.deliver(local.session, log);
      await new Promise((resolve) => setTimeout(resolve, 5));
      return holder.sent.length > 0;
    });
    expect(holder.sent[0]).toEqual(log);
    expect(local.sent).toEqual([]);

    // An upstream server's resources/updated for a subscription made here reaches the holder too.
    holder.sent.length = 0;
    here.relayNotice({ kind: "resources/updated", owner: "ten_a", source: "files", uri: "file:///a", subscribers: [local.session.id] });
    await eventually(() => holder.sent.length === 1);
    expect(holder.sent[0]).toMatchObject({ method: "notifications/resources/updated" });
    expect((holder.sent[0] as { params: { uri: string } }).params.uri).toContain("file:///a");

    there.streamClosed(holder.session);
    await new Promise((resolve) => setTimeout(resolve, 10));
    holder.sent.length = 0;
    here.deliver(local.session, log);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(holder.sent).toEqual([]);
    await Promise.all([here.close(), there.close()]);
  });
});

describe("MCP_MAX_SESSIONS_PER_USER over the real endpoint", () => {
  let server: TestServer;
  const clients: Client[] = [];

  beforeAll(async () => {
    server = await startTestServer({ MCP_MAX_SESSIONS_PER_USER: "2", GATEWAY_RATE_LIMIT_RPM: "100000" });
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  async function open(headers: Record<string, string>) {
    const transport = new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers } });
    const client = new Client({ name: "cap-test", version: "1.0.0" });
    await client.connect(transport);
    clients.push(client);
    return { client, sessionId: transport.sessionId! };
  }

  it("ends the oldest session of a user past the cap: its next request gets 404, the others go on", async () => {
    const a = bearer((await registerUser(server)).token);
    const b = bearer((await registerUser(server)).token);
    const first = await open(a);
    const second = await open(a);
    const theirs = await open(b);
    const third = await open(a);

    const stale = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: {
        ...a,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": first.sessionId,
        "mcp-protocol-version": "2025-11-25",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    });
    expect(stale.status).toBe(404);
    expect(((await stale.json()) as { error: { code: number } }).error.code).toBe(-32004);

    for (const live of [second, third, theirs]) expect((await live.client.listTools()).tools.length).toBeGreaterThan(0);
    const table = mcpSessionsOf(server.dispatcher.ports)!;
    expect(table.all().filter((session) => session.userId === table.get(third.sessionId)!.userId)).toHaveLength(2);
  });
});
