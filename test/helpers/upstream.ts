import { randomUUID } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";

/** Anything with an SDK server to connect a transport to (McpServer or the low-level Server). */
type Connectable = { connect(transport: StreamableHTTPServerTransport): Promise<void>; close(): Promise<void> };

export interface UpstreamMcp {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  /** Sessions initialized so far (each gateway connection is one). */
  sessions(): number;
  /** Headers of every request received, oldest first. */
  requestHeaders: IncomingHttpHeaders[];
  /** JSON-RPC messages of every POST received, oldest first. */
  requestBodies: unknown[];
  close(): Promise<void>;
}

/**
 * A real MCP server over Streamable HTTP on a loopback port: one SDK server per session, as
 * the SDK's own examples (and server-everything's streamableHttp mode) run it.
 */
export async function serveMcp(factory: () => Connectable): Promise<UpstreamMcp> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const servers: Connectable[] = [];
  let initialized = 0;
  const requestHeaders: IncomingHttpHeaders[] = [];
  const requestBodies: unknown[] = [];
  const http = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    requestHeaders.push(req.headers);
    if (!req.url?.startsWith("/mcp")) return res.writeHead(404).end();
    let parsedBody: unknown;
    if (req.method === "POST") {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      parsedBody = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      requestBodies.push(parsedBody);
    }
    const sessionId = req.headers["mcp-session-id"];
    const existing = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
    if (existing) return existing.handleRequest(req, res, parsedBody);
    if (sessionId)
      return res
        .writeHead(404, { "content-type": "application/json" })
        .end('{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}');
    const server = factory();
    servers.push(server);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        initialized += 1;
        transports.set(id, transport);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) transports.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, parsedBody);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    sessions: () => initialized,
    requestHeaders,
    requestBodies,
    async close() {
      await Promise.all(servers.map((server) => server.close().catch(() => undefined)));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** `@modelcontextprotocol/server-everything`, the reference server, served in-process. */
export async function serveEverything(): Promise<UpstreamMcp> {
  // The package ships JavaScript without type declarations.
  const specifier = "@modelcontextprotocol/server-everything/dist/server/index.js";
  const { createServer: createEverything } = (await import(specifier)) as { createServer: () => { server: Connectable } };
  return serveMcp(() => createEverything().server);
}

export interface ScriptedTool {
  tool: Tool;
  run(args: Record<string, unknown>): Promise<CallToolResult> | CallToolResult;
}

/**
 * A small upstream whose tool list the test controls: `setTools` changes it and sends
 * `notifications/tools/list_changed` to every connected session.
 */
export async function serveScripted(initial: ScriptedTool[]): Promise<UpstreamMcp & { setTools(tools: ScriptedTool[]): Promise<void> }> {
  let tools = initial;
  const live: Server[] = [];
  const upstream = await serveMcp(() => {
    const server = new Server({ name: "scripted", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools.map((entry) => entry.tool) }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const entry = tools.find((candidate) => candidate.tool.name === request.params.name);
      if (!entry) return { content: [{ type: "text", text: `unknown tool ${request.params.name}` }], isError: true };
      return entry.run(request.params.arguments ?? {});
    });
    live.push(server);
    return server;
  });
  return {
    ...upstream,
    async setTools(next) {
      tools = next;
      await Promise.all(live.map((server) => server.sendToolListChanged().catch(() => undefined)));
    },
  };
}
