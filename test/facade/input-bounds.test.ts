import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { http, HttpResponse } from "msw";
import { MAX_JSON_DEPTH } from "../../rpc/validate.js";
import { mockUpstreams } from "../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { platformAccount } from "../helpers/chat.js";

/**
 * docs/security.md "Input bounds" and "Upstream errors": a body nested past the limit and a
 * body that is not valid UTF-8 are 400 in each surface's envelope (never a 500, a hang, or a body
 * passed on altered), on every surface and `/rpc`; and an upstream that echoes the key it was
 * sent in its error has that key masked before the client or the log sees it.
 */

const UPSTREAM = "https://api.echoing.test/v1";
const KEY = "sk-live-echoed-by-the-upstream-0123456789";
const msw = mockUpstreams(
  http.post(`${UPSTREAM}/chat/completions`, ({ request }) =>
    HttpResponse.json(
      {
        error: { message: `Incorrect API key provided: ${request.headers.get("authorization")?.slice(7)}`, type: "invalid_request_error" },
      },
      { status: 401 },
    ),
  ),
);

let server: TestServer;
let token: string;
let platformKey: string;
let accountKey: string;

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("ECHOING_KEY", KEY);
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({
      models: {
        "echo-1": { provider: "echo" },
        echoing: { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), apiKeyEnv: "ECHOING_KEY" },
      },
    }),
  });
  token = (await registerUser(server)).token;
  accountKey = (await server.request("/account/v1/keys", { method: "POST", headers: bearer(token), json: { name: "bounds" } })).body.key;
  platformKey = (await platformAccount(server)).key;
});

afterAll(async () => {
  await msw.close();
  vi.unstubAllEnvs();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

/** A JSON Schema nested `depth` arrays deep, as text (too deep for a recursive JSON.stringify). */
function deepSchema(depth: number): string {
  return `${'{"type":"array","items":'.repeat(depth)}{"type":"string"}${"}".repeat(depth)}`;
}

/** Sends raw bytes as a JSON body. */
function send(path: string, bytes: Buffer, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const url = new URL(server.url(path));
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: "POST", headers: { "content-type": "application/json", "content-length": String(bytes.length), ...headers } },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on("error", reject);
    req.end(bytes);
  });
}

const chat = { model: "echo-1", messages: [{ role: "user", content: "hi" }] };

/** Each route, its body (with `"TOOLS"` where a tool list may go) and its credential. */
const ROUTES: { path: string; body: string; headers: () => Record<string, string> }[] = [
  { path: "/gateway/v1/chat/completions", body: JSON.stringify({ ...chat, tools: "TOOLS" }), headers: () => bearer(token) },
  { path: "/account/v1/chat/completions", body: JSON.stringify({ ...chat, tools: "TOOLS" }), headers: () => bearer(accountKey) },
  { path: "/api/v1/chat/completions", body: JSON.stringify({ ...chat, tools: "TOOLS" }), headers: () => bearer(platformKey) },
  { path: "/gateway/v1/responses", body: JSON.stringify({ model: "echo-1", input: "hi", tools: "TOOLS" }), headers: () => bearer(token) },
  { path: "/gateway/v1/messages", body: JSON.stringify({ ...chat, max_tokens: 5, tools: "TOOLS" }), headers: () => bearer(token) },
  { path: "/gateway/v1/messages/count_tokens", body: JSON.stringify({ ...chat, tools: "TOOLS" }), headers: () => bearer(token) },
  {
    path: "/bridge/mcp/",
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "bounds", version: "1" }, tools: "TOOLS" },
    }),
    headers: () => ({ ...bearer(token), accept: "application/json, text/event-stream" }),
  },
  {
    path: "/rpc",
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "gateway.chat.completions", params: { ...chat, tools: "TOOLS" } }),
    headers: () => bearer(token),
  },
];

/** A route's body with one tool whose schema is `schema` (JSON text), or with no tools. */
function bodyOf(route: (typeof ROUTES)[number], schema?: string): Buffer {
  const tools = schema
    ? route.path.includes("/messages")
      ? `[{"name":"deep","input_schema":${schema}}]`
      : route.path.includes("/responses")
        ? `[{"type":"function","name":"deep","parameters":${schema}}]`
        : `[{"type":"function","function":{"name":"deep","parameters":${schema}}}]`
    : "[]";
  return Buffer.from(route.body.replace('"TOOLS"', tools));
}

describe("a body nested past the limit", () => {
  it.each(ROUTES.map((route) => [route.path, route]))(
    "is 400 naming the limit on %s, and the server keeps serving",
    async (_path, route) => {
      const res = await send(route.path, bodyOf(route, deepSchema(5000)), route.headers());
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(JSON.stringify(res.body)).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
      const fine = await send(route.path, bodyOf(route), route.headers());
      expect(fine.status, JSON.stringify(fine.body)).toBe(200);
    },
  );

  it("a body within the limit is served", async () => {
    const res = await send(ROUTES[0]!.path, bodyOf(ROUTES[0]!, deepSchema(MAX_JSON_DEPTH - 10)), bearer(token));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });
});

describe("a body that is not valid UTF-8", () => {
  it.each(ROUTES.map((route) => [route.path, route]))("is 400 on %s, in the surface's envelope", async (_path, route) => {
    // "hi" with a lone continuation byte between its letters: not UTF-8.
    const bytes = bodyOf(route);
    const at = bytes.indexOf('"hi"') + 1;
    const bad = Buffer.concat([bytes.subarray(0, at), Buffer.from([0x68, 0x80, 0x69]), bytes.subarray(at + 2)]);
    const res = await send(route.path, bad, route.headers());
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(JSON.stringify(res.body)).toContain("not valid UTF-8");
    if (route.path === "/rpc") expect(res.body.error.code).toBe(-32700);
    if (route.path.startsWith("/gateway/v1/messages")) expect(res.body.type).toBe("error");
    if (route.path === "/api/v1/chat/completions") expect(res.body.error.type).toBe("invalid_request_error");
  });
});

describe("an upstream that echoes its key", () => {
  it("has the key masked in the relayed error and in the log line", async () => {
    const res = await server.request("/gateway/v1/chat/completions", {
      method: "POST",
      headers: bearer(token),
      json: { model: "echoing", messages: [{ role: "user", content: "hi" }] },
    });
    expect(res.status).toBe(401);
    expect(JSON.stringify(res.body)).not.toContain(KEY);
    expect(res.body.error.message).toBe("Incorrect API key provided: [redacted]");
    expect(JSON.stringify(server.logs())).not.toContain(KEY);
  });
});
