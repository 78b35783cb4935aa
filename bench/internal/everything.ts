import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

/**
 * `@modelcontextprotocol/server-everything` over Streamable HTTP in its own process (one SDK
 * server per session, as its own streamableHttp runner does, without the replay store).
 * Prints `READY <url>`.
 */
type Connectable = { connect(transport: StreamableHTTPServerTransport): Promise<void> };
const specifier = "@modelcontextprotocol/server-everything/dist/server/index.js";
const { createServer: createEverything } = (await import(specifier)) as { createServer: () => { server: Connectable } };
const transports = new Map<string, StreamableHTTPServerTransport>();

const http = createServer(async (req: IncomingMessage, res: ServerResponse) => {
  let body: unknown;
  if (req.method === "POST") {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  }
  const sessionId = req.headers["mcp-session-id"];
  const existing = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
  if (existing) return existing.handleRequest(req, res, body);
  if (sessionId) return res.writeHead(404).end();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => void transports.set(id, transport),
  });
  transport.onclose = () => {
    if (transport.sessionId) transports.delete(transport.sessionId);
  };
  await createEverything().server.connect(transport);
  await transport.handleRequest(req, res, body);
});
http.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
process.stdout.write(`READY http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp\n`);
const stop = () => {
  http.closeAllConnections();
  http.close(() => process.exit(0));
};
process.once("SIGTERM", stop);
process.once("disconnect", stop);
