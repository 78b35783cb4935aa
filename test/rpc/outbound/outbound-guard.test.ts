import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AddressRefused, OutboundGuard, type ResolveHost } from "../../../rpc/outbound/outbound-guard.js";
import { toGuardedFetch } from "../../../rpc/outbound/guarded-fetch.js";

/** The reusable connection-time guard (upstream MCP servers, http_fetch, webhooks). */

const table =
  (answers: Record<string, string[]>): ResolveHost =>
  async (hostname) =>
    (answers[hostname] ?? []).map((address) => ({ address, family: address.includes(":") ? (6 as const) : (4 as const) }));

describe("OutboundGuard", () => {
  let target: Server;
  let port: number;
  let hits = 0;
  beforeAll(async () => {
    target = createServer((req, res) => {
      hits += 1;
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () =>
        res
          .writeHead(200, { "content-type": "application/json", "x-seen-host": req.headers.host ?? "" })
          .end(JSON.stringify({ method: req.method, body })),
      );
    });
    await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
    port = (target.address() as AddressInfo).port;
  });
  afterAll(async () => {
    target.closeAllConnections();
    await new Promise((resolve) => target.close(resolve));
  });

  it("refuses a name when any of its addresses is private, even next to a public one", async () => {
    const guard = new OutboundGuard({ resolve: table({ "mixed.example": ["93.184.216.34", "10.0.0.1"] }) });
    await expect(guard.resolve("mixed.example")).rejects.toBeInstanceOf(AddressRefused);
    await expect(guard.resolve("mixed.example")).rejects.toThrow("mixed.example resolves to 10.0.0.1, a private address");
  });

  it("the guarded fetch refuses at connect a name resolving to loopback, and never connects", async () => {
    const before = hits;
    const fetch = toGuardedFetch(new OutboundGuard({ resolve: table({ "api.example": ["127.0.0.1"] }), hint: "ask an operator" }));
    const error = await fetch(`http://api.example:${port}/`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AddressRefused);
    expect((error as Error).message).toBe("Refused: api.example resolves to 127.0.0.1, a loopback address; ask an operator");
    await expect(fetch(`http://[::ffff:0:7f00:1]:${port}/`)).rejects.toBeInstanceOf(AddressRefused);
    await expect(fetch(`http://[::127.0.0.1]:${port}/`)).rejects.toBeInstanceOf(AddressRefused);
    expect(hits).toBe(before);
  });

  it("a rebinding name cannot switch addresses between the check and the connection: each socket is checked", async () => {
    let answer = "127.0.0.1";
    const guard = new OutboundGuard({ resolve: async () => [{ address: answer, family: 4 }] });
    const fetch = toGuardedFetch(guard);
    await expect(fetch(`http://rebind.example:${port}/`)).rejects.toBeInstanceOf(AddressRefused);
    answer = "169.254.169.254";
    await expect(fetch(`http://rebind.example:${port}/`)).rejects.toThrow("linkLocal");
    guard.close();
  });

  it("where private addresses are allowed, it connects to the resolved address with the name in Host, bodies both ways", async () => {
    const guard = new OutboundGuard({ allowPrivate: true, resolve: table({ "svc.example": ["127.0.0.1"] }) });
    const fetch = toGuardedFetch(guard);
    const res = await fetch(`http://svc.example:${port}/x`, { method: "POST", headers: { "content-type": "text/plain" }, body: "hello" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-seen-host")).toBe(`svc.example:${port}`);
    expect(await res.json()).toEqual({ method: "POST", body: "hello" });
    guard.close();
  });
});
