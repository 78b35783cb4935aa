import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hostCheck } from "../../facade/host-check.js";
import { nativeRoutes } from "../../facade/native-routes.js";
import { createKey } from "../../rpc/keys/create-key.js";
import { registerUser, startTestServer, type TestServer } from "../helpers/server.js";

/*
 * One REST front door: the routes served without h3 (facade/native-routes.ts) and the h3 app
 * (facade/rest.ts) ask one host check and read bodies with one reader (restJsonBody), so a
 * request gets the same answer through either.
 */
let server: TestServer;
let key: string;

beforeAll(async () => {
  server = await startTestServer();
  const user = await registerUser(server);
  const created = await createKey(
    { ...server.composition.ports, keys: server.composition.ports.repos.keys },
    { kind: "gateway", owner: user.user.id, userId: user.user.id, name: "front-door", scopes: ["*"] },
  );
  key = created.secret;
});
afterAll(async () => {
  await server.close();
});

/** A POST with exactly this Host, sent with a Content-Length (native door) or chunked (h3). */
function post(path: string, host: string, body: string, chunked: boolean): Promise<{ status: number; body: any }> {
  const url = new URL(server.url(path));
  const headers = [
    "host",
    host,
    "authorization",
    `Bearer ${key}`,
    "content-type",
    "application/json",
    ...(chunked ? [] : ["content-length", String(Buffer.byteLength(body))]),
  ];
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (part: string) => (text += part));
      res.on("end", () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
    });
    req.on("error", reject);
    if (chunked) req.write(body);
    req.end(chunked ? undefined : body);
  });
}

describe("one REST front door", () => {
  it("both doors ask the same host check", () => {
    const config = server.dispatcher.ports.config;
    expect(hostCheck(config)).toBe(hostCheck(config));
    expect(hostCheck(config)("evil.example")).toBe(false);
    expect(hostCheck(config)(undefined)).toBe(false);
    expect(hostCheck(config)(new URL(server.origin).host)).toBe(true);
    // A request the native door would take but for its Host is left to h3's 403.
    const routes = nativeRoutes(server.dispatcher);
    const plain = { method: "POST", url: "/gateway/v1/chat/completions", headers: { "content-length": "2" } };
    expect(routes.routeOf({ ...plain, headers: { ...plain.headers, host: new URL(server.origin).host } })).toBeDefined();
    expect(routes.routeOf({ ...plain, headers: { ...plain.headers, host: "evil.example" } })).toBeUndefined();
  });

  it("a Host the service does not answer gets the same 403 at either door", async () => {
    const viaNative = await post("/gateway/v1/chat/completions", "evil.example", "{}", false);
    const viaH3 = await post("/gateway/v1/chat/completions", "evil.example", "{}", true);
    expect(viaNative.status).toBe(403);
    expect(viaH3.status).toBe(403);
    expect(viaNative.body.error.message).toBe("Host evil.example is not served here; set ALLOWED_HOSTS to serve it");
    expect(viaH3.body.error.message).toBe(viaNative.body.error.message);
  });

  it("bodies are refused the same way at either door (read by one reader)", async () => {
    const host = new URL(server.origin).host;
    for (const body of ["{", "[1]", '"text"']) {
      const viaNative = await post("/gateway/v1/chat/completions", host, body, false);
      const viaH3 = await post("/gateway/v1/chat/completions", host, body, true);
      expect(viaNative.status).toBe(400);
      expect(viaNative.status).toBe(viaH3.status);
      expect(viaNative.body.error.code ?? viaNative.body.error.type).toBe(viaH3.body.error.code ?? viaH3.body.error.type);
    }
  });
});
