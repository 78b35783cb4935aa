import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeRoutes } from "../../facade/native-routes.js";
import { fullPath } from "../../facade/rest.js";
import { createKey } from "../../rpc/keys/create-key.js";
import { registerUser, startTestServer, type TestServer } from "../helpers/server.js";

/**
 * The plainest POSTs are answered by the Node server itself, without h3 (facade/native-routes.ts).
 * Each case sends the same call once as such a request and once in a form that goes through h3
 * (chunked, or with a query), and the two answers must be the same.
 */
let server: TestServer;
let key: string;

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/** One request with exactly these headers (node:http, so repeated and missing headers are as written). */
function send(path: string, rawHeaders: string[], body: string | undefined, options: { chunked?: boolean } = {}): Promise<Raw> {
  const url = new URL(server.url(path));
  return new Promise((resolve, reject) => {
    // Raw header arrays get no Host of their own.
    const headers: string[] = ["host", url.host, ...rawHeaders];
    if (body !== undefined && !options.chunked) headers.push("content-length", String(Buffer.byteLength(body)));
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: "POST", headers }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (part: Buffer) => parts.push(part));
      res.on("end", () => {
        const text = Buffer.concat(parts).toString("utf8");
        let parsed: unknown = text;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          // keep the text
        }
        resolve({ status: res.statusCode!, headers: res.headers, body: parsed });
      });
    });
    req.on("error", reject);
    if (options.chunked && body !== undefined) req.write(body);
    req.end(options.chunked ? undefined : body);
  });
}

const chatBody = JSON.stringify({ model: "echo-1", messages: [{ role: "user", content: "hello" }] });
const json = ["content-type", "application/json"];

/** What two answers to the same call share (ids and dates differ from call to call). */
function comparable(answer: Raw) {
  const {
    date: _date,
    "x-request-id": _id,
    "request-id": _rid,
    "x-service-request-id": _sid,
    "x-ratelimit-remaining": _left,
    ...headers
  } = answer.headers;
  const body = typeof answer.body === "object" && answer.body ? { ...answer.body } : answer.body;
  if (body && typeof body === "object") {
    delete body.id;
    delete body.created;
    if (body.error && typeof body.error === "object") body.error = { ...body.error, requestId: undefined };
  }
  return { status: answer.status, headers, body };
}

beforeAll(async () => {
  server = await startTestServer();
  const user = await registerUser(server);
  const created = await createKey(
    { ...server.composition.ports, keys: server.composition.ports.repos.keys },
    { kind: "gateway", owner: user.user.id, userId: user.user.id, name: "native", scopes: ["*"] },
  );
  key = created.secret;
});

afterAll(async () => {
  await server.close();
});

describe("which requests are served without h3", () => {
  it("takes a plain POST to a route without path parameters, and nothing else", () => {
    const routes = nativeRoutes(server.dispatcher);
    const plain = { method: "POST", url: "/gateway/v1/chat/completions", headers: { "content-length": "10", host: "127.0.0.1:1" } };
    expect(routes.routeOf(plain)?.method.name).toBe("gateway.chat.completions");
    expect(routes.routeOf({ ...plain, url: "/api/v1/chat/completions" })?.method.name).toBe("platform.chat.completions");
    expect(routes.routeOf({ ...plain, url: "/gateway/v1/messages" })?.method.name).toBe("gateway.messages.create");
    // Anything else goes to h3: its middleware and router answer it.
    expect(routes.routeOf({ ...plain, method: "GET" })).toBeUndefined();
    expect(routes.routeOf({ ...plain, url: "/gateway/v1/chat/completions?x=1" })).toBeUndefined();
    expect(routes.routeOf({ ...plain, url: "/gateway/v1/chat/completions/" })).toBeUndefined();
    expect(routes.routeOf({ ...plain, url: "/gateway/v1/./chat/completions" })).toBeUndefined();
    expect(routes.routeOf({ ...plain, headers: { ...plain.headers, origin: "https://app.example" } })).toBeUndefined();
    expect(routes.routeOf({ ...plain, headers: { host: "127.0.0.1:1", "transfer-encoding": "chunked" } })).toBeUndefined();
    expect(routes.routeOf({ ...plain, headers: { host: "127.0.0.1:1" } })).toBeUndefined();
    expect(routes.routeOf({ ...plain, headers: { host: "127.0.0.1:1", "content-length": "1e3" } })).toBeUndefined();
    expect(routes.routeOf({ ...plain, headers: { host: "127.0.0.1:1", "content-length": String(10 ** 9) } })).toBeUndefined();
    // A Host the service does not answer (bound to loopback: loopback names only) gets h3's 403.
    expect(routes.routeOf({ ...plain, headers: { ...plain.headers, host: "evil.example" } })).toBeUndefined();
    // Console routes (a cookie, the cross-site check) always go through h3.
    const bindings = Object.values(server.dispatcher.registry).flatMap((method) => method.http);
    const consolePosts = bindings.filter(
      (binding) => binding.surface === "console" && binding.method === "POST" && !binding.path.includes(":"),
    );
    expect(consolePosts.length).toBeGreaterThan(0);
    for (const binding of consolePosts) expect(routes.routeOf({ ...plain, url: fullPath(binding) })).toBeUndefined();
  });
});

describe("the same answers as through h3", () => {
  const auth = () => ["authorization", `Bearer ${key}`];

  it("answers a chat completion alike, with the request id the client sent", async () => {
    const headers = [...auth(), ...json, "x-request-id", "native-1"];
    const native = await send("/gateway/v1/chat/completions", headers, chatBody);
    const viaH3 = await send("/gateway/v1/chat/completions", headers, chatBody, { chunked: true });
    expect(native.status).toBe(200);
    expect(native.headers["x-request-id"]).toBe("native-1");
    expect(native.body.choices[0].message.content).toContain("hello");
    expect(comparable(native)).toEqual(comparable(viaH3));
    const lines = server.logs().filter((line) => line.clientRequestId === "native-1");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ operation: "gateway.chat.completions", status: 200, path: "/gateway/v1/chat/completions" });
    expect(Object.keys(lines[0]!).sort()).toEqual(Object.keys(lines[1]!).sort());
  });

  it("refuses a repeated Authorization header as malformed, as a web Request joins them", async () => {
    const headers = [...auth(), ...auth(), ...json];
    const native = await send("/gateway/v1/chat/completions", headers, chatBody);
    const viaH3 = await send("/gateway/v1/chat/completions", headers, chatBody, { chunked: true });
    expect(native.status).toBe(401);
    expect(comparable(native)).toEqual(comparable(viaH3));
  });

  it("answers bad bodies with the same errors", async () => {
    const cases: [string[], string, number][] = [
      [[...auth(), ...json], "{not json", 400],
      [[...auth(), ...json], "[1,2]", 400],
      [[...auth(), "content-type", "text/plain"], chatBody, 400],
      [[...auth(), ...json], JSON.stringify({ model: "echo-1" }), 400],
      [[...json], chatBody, 401],
    ];
    for (const [headers, body, status] of cases) {
      const native = await send("/gateway/v1/chat/completions", headers, body);
      const viaH3 = await send("/gateway/v1/chat/completions", headers, body, { chunked: true });
      expect(native.status, body).toBe(status);
      expect(comparable(native), body).toEqual(comparable(viaH3));
    }
  });

  it("answers the Messages dialect in Anthropic's envelope, with x-api-key", async () => {
    const body = JSON.stringify({ model: "echo-1", max_tokens: 16, messages: [{ role: "user", content: "hi" }] });
    const headers = ["x-api-key", key, ...json, "anthropic-version", "2023-06-01"];
    const native = await send("/gateway/v1/messages", headers, body);
    const viaH3 = await send("/gateway/v1/messages", headers, body, { chunked: true });
    expect(native.status).toBe(200);
    expect(native.body.type).toBe("message");
    expect(comparable(native)).toEqual(comparable(viaH3));
    const refused = await send("/gateway/v1/messages", ["x-api-key", "sk_wrong", ...json], body);
    expect(refused.status).toBe(401);
    expect(refused.body.type).toBe("error");
  });

  it("streams server-sent events alike", async () => {
    const body = JSON.stringify({ model: "echo-1", stream: true, messages: [{ role: "user", content: "stream me" }] });
    const native = await send("/gateway/v1/chat/completions", [...auth(), ...json], body);
    expect(native.status).toBe(200);
    expect(native.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    expect(String(native.body)).toContain("data: [DONE]");
  });

  it("gives a body that stops arriving a 400 in the log, not an error, and keeps serving", async () => {
    const url = new URL(server.url("/gateway/v1/chat/completions"));
    await new Promise<void>((resolve) => {
      const req = httpRequest({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "content-length": "1000",
          "x-request-id": "cut-body",
        },
      });
      req.on("error", () => resolve());
      req.on("close", () => resolve());
      req.write(chatBody.slice(0, 20), () => setTimeout(() => req.destroy(), 50));
    });
    const line = await (async () => {
      for (let i = 0; i < 100; i++) {
        const found = server.logs().find((entry) => entry.clientRequestId === "cut-body");
        if (found) return found;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return undefined;
    })();
    expect(line).toMatchObject({ status: 400, level: "info" });
    expect(server.loggedErrors()).toEqual([]);
    const after = await send("/gateway/v1/chat/completions", [...auth(), ...json], chatBody);
    expect(after.status).toBe(200);
  });
});
