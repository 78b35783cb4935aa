import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { pathProblem } from "../../facade/strict-paths.js";

/**
 * docs/security.md "Strict paths": dot segments (literal or encoded), encoded slashes and
 * backslashes are refused with 400 before routing. Before, `/api/v1/%2e%2e/%2e%2e/gateway/v1/auth/me`
 * was served as the Gateway's /auth/me and `/gateway/v1/%2e%2e/%2e%2e/metrics` reached /metrics.
 * Requests go out with node:http, which sends the path as written (fetch would resolve it first).
 */
let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startTestServer();
  token = (await registerUser(server)).token;
});
afterAll(async () => {
  await server?.close();
});

function raw(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; body: any }> {
  const { port } = new URL(server.origin);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers: { host: `127.0.0.1:${port}`, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode!, headers: res.headers, body });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

describe("strict paths", () => {
  it("the issue's examples: 400 before routing, in the envelope of the surface the raw path starts with", async () => {
    const walk = await raw("/api/v1/%2e%2e/%2e%2e/gateway/v1/auth/me", bearer(token));
    expect(walk.status).toBe(400);
    // Platform envelope (OpenAI style), not the Gateway's /auth/me answer.
    expect(walk.body).toEqual({ error: { message: expect.stringContaining("encoded '..' segment"), type: "invalid_request_error", code: "bad_request" } });
    expect(walk.headers["x-request-id"]).toBeUndefined();

    const metrics = await raw("/gateway/v1/%2e%2e/%2e%2e/metrics");
    expect(metrics.status).toBe(400);
    expect(metrics.body.error).toMatchObject({ code: "BAD_REQUEST", details: { reason: "path" } });
    expect(metrics.body.error.requestId).toBe(metrics.headers["x-request-id"]);
    expect(String(metrics.body)).not.toContain("# HELP");
  });

  it("every form: literal and encoded dot segments, encoded slashes, backslashes; each surface's envelope, plain JSON elsewhere", async () => {
    const cases: [path: string, check: (body: any) => void][] = [
      ["/gateway/v1/../../metrics", (body) => expect(body.error.code).toBe("BAD_REQUEST")],
      ["/gateway/v1/./auth/me", (body) => expect(body.error.message).toContain("'.' segment")],
      ["/gateway/v1/.%2E/auth/me", (body) => expect(body.error.code).toBe("BAD_REQUEST")],
      ["/gateway/v1/%2E./auth/me", (body) => expect(body.error.code).toBe("BAD_REQUEST")],
      ["/gateway/v1/auth%2fme", (body) => expect(body.error.message).toContain("encoded slash")],
      ["/gateway/v1/auth%2Fme", (body) => expect(body.error.message).toContain("encoded slash")],
      ["/gateway/v1/auth%5cme", (body) => expect(body.error.message).toContain("backslash")],
      ["/gateway/v1/auth\\me", (body) => expect(body.error.message).toContain("backslash")],
      ["/account/v1/%2e/me", (body) => expect(body).toEqual({ error: { message: expect.any(String), type: "invalid_request_error" } })],
      ["/api/api-keys/%2e%2e/session", (body) => expect(body).toEqual({ error: { message: expect.any(String) } })],
      ["/bridge/v1/%2e%2e/mcp", (body) => expect(body.error.code).toBe("BAD_REQUEST")],
      ["/rpc/%2e%2e", (body) => expect(body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32602, data: { code: "BAD_REQUEST", status: 400 } } })],
      ["/%2e%2e/metrics", (body) => expect(body.error).toMatchObject({ code: "BAD_REQUEST" })],
      ["/docs/assets/..%2Fpackage.json", (body) => expect(body.error.code).toBe("BAD_REQUEST")],
      ["http://127.0.0.1/gateway/v1/%2e%2e/metrics", (body) => expect(body.error.code).toBe("BAD_REQUEST")],
    ];
    for (const [path, check] of cases) {
      const res = await raw(path, bearer(token));
      expect(res.status, path).toBe(400);
      check(res.body);
    }
  });

  it("leaves ordinary paths, dots inside names and anything in the query alone", async () => {
    expect((await raw("/gateway/v1/auth/me", bearer(token))).status).toBe(200);
    expect((await raw("/gateway/v1/auth/me?next=%2F..%2Fx&p=a\\b", bearer(token))).status).toBe(200);
    expect((await raw("/gateway/v1/models/gpt-4.1..x", bearer(token))).status).not.toBe(400);
    expect((await raw("/metrics")).status).toBe(200);
  });

  it("refuses a WebSocket upgrade on such a path before any socket opens", async () => {
    const { port } = new URL(server.origin);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1", () => {
        socket.write(
          `GET /bridge/%2e%2e/bridge/v1/vms/connect HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
        );
      });
      let text = "";
      socket.on("data", (chunk) => (text += chunk.toString()));
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('"code":"BAD_REQUEST"');
  });

  it("pathProblem judges the path only", () => {
    expect(pathProblem("/a/b.c/d")).toBeUndefined();
    expect(pathProblem("/a/...")).toBeUndefined();
    expect(pathProblem("/a?x=/../")).toBeUndefined();
    expect(pathProblem("*")).toBeUndefined();
    expect(pathProblem("/a/..")).toContain("'..'");
    expect(pathProblem("/a/%2E")).toContain("'.'");
  });
});
