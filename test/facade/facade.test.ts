import { serve } from "h3";
import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../facade/app.js";
import { defineMethod } from "../../rpc/define.js";
import { Dispatcher } from "../../rpc/dispatcher.js";
import { loadConfig } from "../../rpc/config.js";
import { createLogger } from "../../rpc/log.js";
import { createRegistry } from "../../rpc/registry.js";
import { methodsFor } from "../../rpc/modules.js";
import { compose, type Composition } from "../../rpc/compose.js";
import { noTools } from "../../rpc/tools/no-tools.js";
import { bearer, registerUser, startTestServer, TEST_JWT_SECRET, type TestServer } from "../helpers/server.js";

const G = "/gateway/v1";

describe("bad input on REST", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  it("answers malformed JSON with 400 in the surface's envelope", async () => {
    const res = await server.request(`${G}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"email": ',
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "PARSE_ERROR", message: "Malformed JSON in request body" });
    expect(res.body.error.requestId).toBe(res.headers.get("x-request-id"));
  });

  it("answers a wrong content type with 400, as every surface does", async () => {
    const res = await server.request(`${G}/auth/login`, { method: "POST", headers: { "content-type": "text/plain" }, body: "email=a" });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "BAD_REQUEST", message: "Content-Type must be application/json" });
  });

  it("answers a JSON body that is not an object with 400", async () => {
    for (const body of ["[1,2]", "42", '"text"', "null"]) {
      const res = await server.request(`${G}/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body });
      expect(res.status).toBe(400);
    }
  });

  it("answers missing fields and wrong types with 400 listing the issues", async () => {
    const res = await server.request(`${G}/auth/login`, { method: "POST", json: { email: ["x"] } });
    expect(res.status).toBe(400);
    const paths = res.body.error.details.issues.map((issue: any) => issue.path);
    expect(paths).toEqual(expect.arrayContaining(["email", "password"]));
  });

  it("refuses a body over 1 MiB with 413 when Content-Length says so", async () => {
    const res = await server.request(`${G}/auth/login`, { method: "POST", json: { email: "a@b.co", password: "x".repeat(1024 * 1024) } });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("PAYLOAD_TOO_LARGE");
  });

  it("refuses a chunked body over 1 MiB with 413 without reading it all", async () => {
    let sent = 0;
    const chunk = new Uint8Array(64 * 1024).fill(0x20);
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        // Far more than the limit: the server must stop reading and answer.
        if (sent >= 64 * 1024 * 1024) return controller.close();
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const res = await fetch(server.url(`${G}/auth/login`), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("PAYLOAD_TOO_LARGE");
    expect(sent).toBeLessThan(64 * 1024 * 1024);
  });

  it("answers unknown paths with 404 and wrong methods with 405 + Allow", async () => {
    const missing = await server.request(`${G}/nothing-here`);
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("NOT_FOUND");
    const wrong = await server.request(`${G}/auth/keys`, { method: "PUT" });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe("GET, POST");
  });

  it("renders errors in the Platform, Account and console envelopes", async () => {
    const platform = await server.request("/api/v1/nothing");
    expect(platform.status).toBe(404);
    expect(platform.body.error).toMatchObject({ type: "not_found_error" });
    expect(platform.headers.get("x-request-id")).toBeNull();
    const console = await server.request("/api/api-keys-nothing");
    expect(console.body).toEqual({ error: { message: expect.any(String) } });
  });
});

describe("JSON-RPC at POST /rpc", () => {
  let server: TestServer;
  let token: string;
  beforeAll(async () => {
    server = await startTestServer();
    token = (await registerUser(server)).token;
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  const rpc = (body: unknown, headers: Record<string, string> = {}) =>
    server.request("/rpc", { method: "POST", headers: { ...bearer(token), ...headers }, json: body });

  it("calls a method with the caller's credentials", async () => {
    const res = await rpc({ jsonrpc: "2.0", id: 7, method: "auth.me" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ jsonrpc: "2.0", id: 7, result: { authenticatedBy: "session" } });
  });

  it("applies the same credential checks as REST", async () => {
    const res = await server.request("/rpc", { method: "POST", json: { jsonrpc: "2.0", id: 1, method: "auth.me" } });
    expect(res.body.error).toMatchObject({ code: -32001, data: { code: "UNAUTHORIZED", status: 401 } });
  });

  it("answers a batch in order, with per-call errors", async () => {
    const res = await rpc([
      { jsonrpc: "2.0", id: "a", method: "auth.me" },
      { jsonrpc: "2.0", id: "b", method: "no.such.method" },
      { jsonrpc: "2.0", id: "c", method: "auth.keys.create", params: { name: 12 } },
      { jsonrpc: "2.0", method: "auth.me" },
    ]);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(3);
    expect(res.body[0]).toMatchObject({ id: "a", result: { authenticatedBy: "session" } });
    expect(res.body[1]).toMatchObject({ id: "b", error: { code: -32601 } });
    expect(res.body[2]).toMatchObject({ id: "c", error: { code: -32602, data: { code: "VALIDATION_FAILED" } } });
  });

  it("gives notifications no reply (202)", async () => {
    const res = await rpc({ jsonrpc: "2.0", method: "auth.me" });
    expect(res.status).toBe(202);
    expect(res.body).toBeUndefined();
  });

  it("answers an empty batch, an oversized batch, a parse error and an invalid request", async () => {
    const empty = await rpc([]);
    expect(empty.status).toBe(400);
    expect(empty.body.error.code).toBe(-32600);
    const big = await rpc(Array.from({ length: 51 }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "auth.me" })));
    expect(big.body.error.code).toBe(-32600);
    const parse = await server.request("/rpc", { method: "POST", headers: { "content-type": "application/json" }, body: "{oops" });
    expect(parse.status).toBe(400);
    expect(parse.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });
    const invalid = await rpc({ id: 1, method: 5 });
    expect(invalid.body.error.code).toBe(-32600);
  });

  it("answers bodies that are no request object with -32600 and HTTP 400, never a 500", async () => {
    for (const body of ["null", "42", '"x"', "true"]) {
      const res = await server.request("/rpc", { method: "POST", headers: { ...bearer(token), "content-type": "application/json" }, body });
      expect(res.status, body).toBe(400);
      expect(res.body, body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
    }
    for (const body of ["[null]", "[1]", '[1, "x"]']) {
      const res = await server.request("/rpc", { method: "POST", headers: { ...bearer(token), "content-type": "application/json" }, body });
      expect(res.status, body).toBe(400);
      expect(Array.isArray(res.body), body).toBe(true);
      for (const reply of res.body) expect(reply).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
    }
    // A batch mixing a valid request and garbage answers both, with 200.
    const mixed = await server.request("/rpc", {
      method: "POST",
      headers: { ...bearer(token), "content-type": "application/json" },
      body: JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "auth.me" }, 7]),
    });
    expect(mixed.status).toBe(200);
    expect(mixed.body).toEqual([
      expect.objectContaining({ id: 1, result: expect.any(Object) }),
      expect.objectContaining({ id: null, error: expect.objectContaining({ code: -32600 }) }),
    ]);
  });

  it("does not offer transport gates (socket upgrades, MCP admission) as methods", async () => {
    for (const method of [
      "bridge.vms.connect",
      "bridge.mcp.connect",
      "bridge.mcp.tools.list",
      "bridge.mcp.tools.call",
      "agents.stream.connect",
    ]) {
      const res = await rpc({ jsonrpc: "2.0", id: 1, method, params: {} });
      expect(res.body.error.code, method).toBe(-32601);
    }
  });
});

describe("unexpected exceptions", () => {
  let services: Composition;
  let close: () => Promise<void>;
  let origin: string;
  const lines: string[] = [];

  beforeAll(async () => {
    const config = loadConfig({ STORAGE: "memory", GATEWAY_JWT_SECRET: TEST_JWT_SECRET, LOG_LEVEL: "info" });
    services = await compose(
      config,
      createLogger("info", (line) => lines.push(line)),
      noTools,
    );
    const broken = defineMethod({
      name: "test.broken",
      summary: "Fails the way a driver would.",
      input: v.object({}),
      auth: "public",
      http: [{ surface: "gateway", method: "GET", path: "/test/broken" }],
      handler() {
        throw new Error("ECONNRESET redis://secret-host:6379 password=hunter2");
      },
    });
    const dispatcher = new Dispatcher(
      createRegistry([...Object.values(services.dispatcher.registry), broken]),
      services.dispatcher.ports,
      services.dispatcher.deps,
    );
    const server = serve(buildApp(dispatcher), { port: 0, hostname: "127.0.0.1", silent: true, gracefulShutdown: false });
    await server.ready();
    origin = new URL(server.url!).origin;
    close = async () => {
      await server.close(true);
      await services.close();
    };
  });
  afterAll(() => close());

  it("are masked as an internal error with the request id, over REST and JSON-RPC, and logged", async () => {
    const res = await fetch(`${origin}${G}/test/broken`);
    expect(res.status).toBe(500);
    const body = await res.json();
    expect(body).toEqual({ error: { code: "INTERNAL", message: "Internal error", requestId: res.headers.get("x-request-id") } });
    const rpc = await fetch(`${origin}/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "test.broken" }),
    });
    const rpcBody = (await rpc.json()) as { error: unknown };
    expect(rpcBody.error).toMatchObject({ code: -32603, message: "Internal error" });
    expect(JSON.stringify(rpcBody)).not.toContain("hunter2");
    const errors = lines.map((line) => JSON.parse(line)).filter((line) => line.level === "error");
    expect(errors.map((e) => e.requestId)).toContain((body as { error: { requestId: string } }).error.requestId);
    expect(errors[0].error).toContain("ECONNRESET");
  });
});

describe("registry", () => {
  it("refuses duplicate names and the reserved rpc. prefix", () => {
    const method = methodsFor({})[0]!;
    expect(() => createRegistry([method, method])).toThrow(/Duplicate method/);
    expect(() => createRegistry([{ ...method, name: "rpc.discover" }])).toThrow(/reserved/);
  });
});
