import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpFetch } from "../../../bridge/builtin/http-fetch.js";
import type { ResolveHost } from "../../../rpc/outbound/outbound-guard.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/** `http_fetch` applies the address rule to the address it connects to (docs/security.md). */

const toLoopback: ResolveHost = async (hostname) => {
  if (hostname.endsWith(".example")) return [{ address: "127.0.0.1", family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
};

describe("http_fetch and the address rule", () => {
  let target: Server;
  let port: number;
  const seen: { host?: string; url?: string }[] = [];
  let server: TestServer;
  let headers: Record<string, string>;

  beforeAll(async () => {
    target = createServer((req, res) => {
      seen.push({ host: req.headers.host, url: req.url });
      res.writeHead(200, { "content-type": "text/plain" }).end("inside");
    });
    await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
    port = (target.address() as AddressInfo).port;
    server = await startTestServer({ GATEWAY_RATE_LIMIT_RPM: "10000" }, { resolveHost: toLoopback });
    headers = bearer((await registerUser(server)).token);
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
    target.closeAllConnections();
    await new Promise((resolve) => target.close(resolve));
  });

  const fetchTool = (url: string) =>
    server.request("/gateway/v1/mcp/tools/execute?tool=http_fetch", { method: "POST", headers, json: { args: { url } } });

  it("refuses a public-looking name that resolves to 127.0.0.1, at connect, without reaching it", async () => {
    const before = seen.length;
    const res = await fetchTool(`http://www.public.example:${port}/`);
    expect(res.status).toBe(200);
    expect(res.body.isError).toBe(true);
    expect(res.body.content[0].text).toContain("www.public.example resolves to 127.0.0.1");
    expect(seen.length).toBe(before);
  });

  it.each([
    "[::127.0.0.1]",
    "[::ffff:0:7f00:1]",
    "[2002:7f00:1::1]",
    "[64:ff9b::7f00:1]",
    "[::ffff:127.0.0.1]",
    "127.0.0.1",
    "0x7f000001",
    "[::1]",
  ])("refuses the literal %s", async (host) => {
    const before = seen.length;
    const res = await fetchTool(`http://${host}:${port}/`);
    expect(res.body.isError).toBe(true);
    expect(res.body.content[0].text).toMatch(/^Refused: /);
    expect(seen.length).toBe(before);
  });

  it("connects to the resolved address with the name kept in the Host header (allowed only where private addresses are)", async () => {
    const tool = httpFetch({ allowPrivateAddresses: true, resolveHost: toLoopback });
    const result = await tool.run({ url: `http://pinned.example:${port}/page` }, { timeoutMs: 5000 });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ status: 200, body: "inside" });
    expect(seen.at(-1)).toEqual({ host: `pinned.example:${port}`, url: "/page" });
  });
});
