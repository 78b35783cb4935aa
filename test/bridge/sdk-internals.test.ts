import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  ListRootsRequestSchema,
  ListToolsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import {
  bindJsonResponseFlag,
  loggingLevelOf,
  awaitsResponse,
  markInitialized,
  setClientOf,
  requestHandlerAborts,
  SDK_VERSION,
  setLoggingLevelOf,
  STANDALONE_STREAM,
  transportStreams,
} from "../../bridge/mcp/sdk-internals.js";
import { eventually } from "../helpers/eventually.js";

/*
 * The SDK fields bridge/mcp/sdk-internals.ts reaches into, checked on real SDK objects: each
 * exists with the shape and the meaning the gateway relies on. An SDK upgrade that renames or
 * reshapes one fails here.
 */

const root = new URL("../../", import.meta.url);

const PRIVATE_FIELDS = new RegExp(
  `_(${[
    "requestHandlerAbortControllers",
    "loggingLevels",
    "streamMapping",
    "requestToStreamMapping",
    "enableJsonResponse",
    "standaloneSseStreamId",
    "initialized",
    "clientCapabilities",
    "clientVersion",
    "responseHandlers",
  ].join("|")})\\b|\\)\\._[a-zA-Z]`,
);

describe("MCP SDK internals", () => {
  it("the SDK is pinned exactly to the version the internals were read from", () => {
    const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8")) as { dependencies: Record<string, string> };
    const lock = JSON.parse(readFileSync(new URL("package-lock.json", root), "utf8")) as {
      packages: Record<string, { version?: string; dependencies?: Record<string, string> }>;
    };
    expect(pkg.dependencies["@modelcontextprotocol/sdk"]).toBe(SDK_VERSION);
    expect(lock.packages[""]!.dependencies!["@modelcontextprotocol/sdk"]).toBe(SDK_VERSION);
    expect(lock.packages["node_modules/@modelcontextprotocol/sdk"]!.version).toBe(SDK_VERSION);
    // The SDK's exports map has no package.json entry: its installed copy is read from the folder its entry point is in.
    const entry = createRequire(import.meta.url).resolve("@modelcontextprotocol/sdk/types.js");
    const installed = JSON.parse(readFileSync(join(entry.slice(0, entry.lastIndexOf("/dist/")), "package.json"), "utf8")) as {
      version: string;
    };
    expect(installed.version).toBe(SDK_VERSION);
  });

  it("no file but the adapter reaches into the SDK's private fields", () => {
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(new URL(dir, root), { withFileTypes: true })) {
        const path = `${dir}${entry.name}`;
        if (entry.isDirectory()) walk(`${path}/`);
        else if (path.endsWith(".ts") && path !== "bridge/mcp/sdk-internals.ts") {
          const text = readFileSync(new URL(path, root), "utf8");
          // The fields the adapter covers, and any cast-then-private access (`(x as unknown as T)._field`).
          if (PRIVATE_FIELDS.test(text)) offenders.push(path);
        }
      }
    };
    for (const dir of ["bridge/", "rpc/", "facade/", "storage/"]) walk(dir);
    expect(offenders).toEqual([]);
  });

  async function connected() {
    const server = new Server({ name: "internals", version: "0" }, { capabilities: { tools: {}, logging: {} } });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let aborted: AbortSignal | undefined;
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [] }));
    server.setRequestHandler(CallToolRequestSchema, async (_request, extra) => {
      aborted = extra.signal;
      await Promise.race([held, new Promise((resolve) => extra.signal.addEventListener("abort", resolve))]);
      return { content: [] };
    });
    const client = new Client({ name: "c", version: "0" }, { capabilities: {} });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
    return { server, client, release, signal: () => aborted };
  }

  it("requestHandlerAborts is the map where a running request's controller sits, and cancellation aborts it", async () => {
    const { server, client, signal } = await connected();
    const aborts = requestHandlerAborts(server);
    expect(aborts).toBeInstanceOf(Map);
    const cancel = new AbortController();
    const call = client.callTool({ name: "slow" }, undefined, { signal: cancel.signal }).catch((error: unknown) => error);
    const [id, controller] = await eventually(() => [...aborts.entries()][0]);
    expect(typeof id === "number" || typeof id === "string").toBe(true);
    expect(controller).toBeInstanceOf(AbortController);
    expect(signal()).toBe(controller.signal);
    cancel.abort("stop");
    await eventually(() => controller.signal.aborted);
    await call;
    // A controller registered from outside is aborted by notifications/cancelled for its id too.
    const outside = new AbortController();
    aborts.set("gw-1", outside);
    await client.notification({ method: "notifications/cancelled", params: { requestId: "gw-1", reason: "test" } });
    await eventually(() => outside.signal.aborted);
    await client.close();
  });

  it("loggingLevelOf reads the level logging/setLevel stored, and sendLoggingMessage filters by what setLoggingLevelOf writes", async () => {
    const { server, client } = await connected();
    const received: string[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void received.push(notification.params.level));
    expect(loggingLevelOf(server, undefined)).toBeUndefined();
    await client.setLoggingLevel("warning");
    expect(loggingLevelOf(server, undefined)).toBe("warning");
    setLoggingLevelOf(server, undefined, "error");
    expect(loggingLevelOf(server, undefined)).toBe("error");
    await server.sendLoggingMessage({ level: "warning", data: "dropped" });
    await server.sendLoggingMessage({ level: "error", data: "kept" });
    await eventually(() => received.length === 1);
    expect(received).toEqual(["error"]);
    await client.close();
  });

  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
  };

  async function transportSession(json: { value: boolean }) {
    const server = new Server({ name: "internals", version: "0" }, { capabilities: { tools: {} } });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    server.setRequestHandler(CallToolRequestSchema, async () => {
      await held;
      return { content: [{ type: "text", text: "done" }] };
    });
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => "s-1", enableJsonResponse: true });
    bindJsonResponseFlag(transport, () => json.value);
    await server.connect(transport);
    const init = await transport.handleRequest(
      new Request("http://x/mcp", {
        method: "POST",
        headers,
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 0,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "c", version: "0" } },
        }),
      }),
    );
    await init.text();
    const session = { ...headers, "mcp-session-id": "s-1" };
    await transport.handleRequest(
      new Request("http://x/mcp", {
        method: "POST",
        headers: session,
        body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
      }),
    );
    const call = (id: number) =>
      transport.handleRequest(
        new Request("http://x/mcp", {
          method: "POST",
          headers: session,
          body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "t", arguments: {} } }),
        }),
      );
    return { server, transport, session, call, release };
  }

  it("transportStreams holds a pending JSON answer's stream by request id until it is sent", async () => {
    const { transport, call, release, server } = await transportSession({ value: true });
    const { streams, requestStreams } = transportStreams(transport);
    expect(streams).toBeInstanceOf(Map);
    expect(requestStreams).toBeInstanceOf(Map);
    const answer = call(7);
    const streamId = await eventually(() => requestStreams.get(7));
    expect(typeof streamId).toBe("string");
    expect(typeof streams.get(streamId!)?.resolveJson).toBe("function");
    release();
    const response = await answer;
    expect(response.headers.get("content-type")).toMatch(/application\/json/);
    expect(JSON.parse(await response.text())).toMatchObject({ id: 7, result: { content: [{ text: "done" }] } });
    await server.close();
  });

  it("markInitialized and setClientOf make a fresh server and transport serve a session opened elsewhere", async () => {
    const server = new Server({ name: "internals", version: "0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [] }));
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => "never", enableJsonResponse: true });
    await server.connect(transport);
    const list = () =>
      transport.handleRequest(
        new Request("http://x/mcp", {
          method: "POST",
          headers: { ...headers, "mcp-session-id": "elsewhere" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
        }),
      );
    // Before: the transport refuses a session it did not initialize.
    expect((await list()).status).toBe(400);
    markInitialized(transport, "elsewhere");
    setClientOf(server, { sampling: {} }, { name: "resumed", version: "2" });
    const response = await list();
    expect(response.status).toBe(200);
    expect(response.headers.get("mcp-session-id")).toBe("elsewhere");
    expect(JSON.parse(await response.text())).toMatchObject({ id: 1, result: { tools: [] } });
    expect(server.getClientCapabilities()).toEqual({ sampling: {} });
    expect(server.getClientVersion()).toEqual({ name: "resumed", version: "2" });
    await server.close();
  });

  it("awaitsResponse is true while the server waits for the client's answer to its request", async () => {
    const server = new Server({ name: "internals", version: "0" }, { capabilities: {} });
    const client = new Client({ name: "c", version: "0" }, { capabilities: { roots: {} } });
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      await answered;
      return { roots: [] };
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
    const pending = server.listRoots();
    const id = await eventually(() => [0, 1, 2, 3].find((candidate) => awaitsResponse(server, candidate)));
    expect(awaitsResponse(server, id! + 100)).toBe(false);
    answer();
    await pending;
    expect(awaitsResponse(server, id)).toBe(false);
    await client.close();
  });

  it("the GET stream sits under STANDALONE_STREAM with its controller", async () => {
    const { transport, session, server } = await transportSession({ value: true });
    const get = await transport.handleRequest(
      new Request("http://x/mcp", { method: "GET", headers: { ...session, accept: "text/event-stream" } }),
    );
    expect(get.headers.get("content-type")).toMatch(/text\/event-stream/);
    expect(transportStreams(transport).streams.get(STANDALONE_STREAM)?.controller).toBeDefined();
    await get.body?.cancel();
    await server.close();
  });

  it("bindJsonResponseFlag decides the answer form the transport picks for a POST", async () => {
    const json = { value: false };
    const { call, release, server } = await transportSession(json);
    release();
    const sse = await call(1);
    expect(sse.headers.get("content-type")).toMatch(/text\/event-stream/);
    expect(await sse.text()).toMatch(/"id":1/);
    json.value = true;
    const plain = await call(2);
    expect(plain.headers.get("content-type")).toMatch(/application\/json/);
    await plain.text();
    await server.close();
  });
});
