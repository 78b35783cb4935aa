import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { httpFetch } from "../../../bridge/builtin/http-fetch.js";
import { guardedRequest, toGuardedFetch } from "../../../rpc/outbound/guarded-fetch.js";
import { AddressRefused, OutboundGuard, type ResolveHost } from "../../../rpc/outbound/outbound-guard.js";

/*
 * Every outbound path opens its connections through one function, OutboundGuard.open: the
 * guarded fetch (upstream MCP servers, OAuth), the guarded request (tools/call, webhooks) and
 * the `http_fetch` built-in. Each refuses the same targets the same way, and never connects.
 */

const resolver: ResolveHost = async (hostname) => {
  if (hostname === "loopback.example") return [{ address: "127.0.0.1", family: 4 }];
  if (hostname === "metadata.example") return [{ address: "169.254.169.254", family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
};

describe("one guard for every outbound path", () => {
  let target: Server;
  let port: number;
  let hits = 0;
  beforeAll(async () => {
    target = createServer((_req, res) => {
      hits += 1;
      res.end("reached");
    });
    await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
    port = (target.address() as AddressInfo).port;
  });
  afterAll(async () => {
    target.closeAllConnections();
    await new Promise((resolve) => target.close(resolve));
  });
  afterEach(() => vi.restoreAllMocks());

  const targets = () => [
    { url: `http://127.0.0.1:${port}/`, refusal: "Refused: 127.0.0.1 is a loopback address" },
    { url: `http://[::ffff:127.0.0.1]:${port}/`, refusal: "IPv6 address embedding a loopback address" },
    { url: `http://loopback.example:${port}/`, refusal: "Refused: loopback.example resolves to 127.0.0.1, a loopback address" },
    { url: `http://metadata.example:${port}/`, refusal: "resolves to 169.254.169.254, a linkLocal address" },
  ];

  const paths: Record<string, (url: string) => Promise<string>> = {
    "guarded fetch": async (url) => {
      const error = await toGuardedFetch(new OutboundGuard({ resolve: resolver }))(url).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AddressRefused);
      return (error as Error).message;
    },
    "guarded request": async (url) => {
      const guard = new OutboundGuard({ resolve: resolver });
      const error = await guardedRequest(guard, url, { method: "POST", headers: {}, body: "{}" }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AddressRefused);
      return (error as Error).message;
    },
    http_fetch: async (url) => {
      const result = await httpFetch({ resolveHost: resolver }).run({ url }, { timeoutMs: 5000 });
      expect(result.isError).toBe(true);
      return result.content[0]!.text!;
    },
  };

  for (const [path, send] of Object.entries(paths)) {
    it(`${path} refuses private targets through OutboundGuard.open, literal or resolved, without connecting`, async () => {
      const open = vi.spyOn(OutboundGuard.prototype, "open");
      const before = hits;
      for (const { url, refusal } of targets()) expect(await send(url)).toContain(refusal);
      expect(open).toHaveBeenCalledTimes(targets().length);
      expect(hits).toBe(before);
    });
  }

  it("open() accepts http and https only", () => {
    const guard = new OutboundGuard({ resolve: resolver });
    expect(() => guard.open(new URL("ftp://files.example/x"), { method: "GET", headers: {} })).toThrow(TypeError);
    expect(() => guard.open(new URL("file:///etc/passwd"), { method: "GET", headers: {} })).toThrow("unsupported protocol file:");
  });
});
