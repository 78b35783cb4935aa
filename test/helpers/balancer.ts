import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Balancer {
  origin: string;
  /** The instances' origins, set once they run. */
  targets: string[];
  /** Requests each target got, by path prefix (`/oauth`, `/api`, `/bridge`, …). */
  served: Map<string, Map<string, number>>;
  close(): Promise<void>;
}

/**
 * A plain round-robin balancer: every request to the next instance in turn, `Mcp-Session-Id`
 * or not (docs/mcp.md "Sessions on any instance"). A test takes a stopped instance out of
 * `targets`, as a balancer's health check would.
 */
export async function roundRobinBalancer(): Promise<Balancer> {
  const served = new Map<string, Map<string, number>>();
  let turn = 0;
  const front: Balancer = { origin: "", targets: [], served, close: async () => undefined };
  const server: Server = createServer((req: IncomingMessage, res) => {
    const target = front.targets[turn++ % front.targets.length]!;
    const section = `/${(req.url ?? "/").split("/")[1] ?? ""}`;
    const counts = served.get(target) ?? new Map<string, number>();
    counts.set(section, (counts.get(section) ?? 0) + 1);
    served.set(target, counts);
    const url = new URL(target);
    const upstream = request({ host: url.hostname, port: url.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on("error", () => res.headersSent || res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  front.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  front.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return front;
}
