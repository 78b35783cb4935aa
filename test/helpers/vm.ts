import WebSocket from "ws";
import { JSONRPCClient, JSONRPCServer, JSONRPCServerAndClient } from "json-rpc-2.0";

export interface TestVm {
  ws: WebSocket;
  rpc: JSONRPCServerAndClient<void, void>;
  /** Every raw text frame the bridge sent. */
  frames: string[];
  closed: Promise<{ code: number; reason: string }>;
  register(tools: { name: string; description?: string; inputSchema?: Record<string, unknown>; category?: string }[]): Promise<unknown>;
  close(): Promise<void>;
}

/** The socket URL of a VM agent on a test server (http origin → ws). */
export function vmSocketUrl(origin: string, agentId: string, query: Record<string, string>): string {
  return `${origin.replace(/^http/, "ws")}/bridge/agents/${agentId}/ws?${new URLSearchParams(query)}`;
}

/** Opens a socket and resolves on open, or rejects with the refusal's status and body. */
export function openSocket(url: string, options: WebSocket.ClientOptions & { protocols?: string[] } = {}): Promise<WebSocket> {
  const { protocols, ...rest } = options;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, rest);
    ws.once("open", () => resolve(ws));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () =>
        reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode, body, headers: res.headers })),
      );
    });
    ws.once("error", reject);
  });
}

/**
 * A VM agent as the real one is built: `ws` plus json-rpc-2.0's JSONRPCServerAndClient.
 * `methods` answer the bridge's calls (`tools/call`, `ping`).
 */
export async function connectVm(url: string, token: string, methods: Record<string, (params: any) => unknown> = {}): Promise<TestVm> {
  const ws = await openSocket(url, { headers: { authorization: `Bearer ${token}` } });
  const frames: string[] = [];
  const server = new JSONRPCServer({ errorListener: () => undefined });
  server.addMethod("ping", () => ({}));
  for (const [name, fn] of Object.entries(methods)) server.addMethod(name, fn);
  const client = new JSONRPCClient((payload) => {
    ws.send(JSON.stringify(payload));
  });
  const rpc = new JSONRPCServerAndClient(server, client, { errorListener: () => undefined });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  ws.on("message", (data) => {
    const text = data.toString();
    frames.push(text);
    try {
      rpc.receiveAndSend(JSON.parse(text)).catch(() => undefined);
    } catch {
      // not JSON: recorded in frames only
    }
  });
  void closed.then(() => rpc.rejectAllPendingRequests("closed"));
  return {
    ws,
    rpc,
    frames,
    closed,
    register: (tools) => Promise.resolve(rpc.request("tools/register", { tools })),
    async close() {
      if (ws.readyState === WebSocket.CLOSED) return;
      ws.close();
      await closed;
    },
  };
}
