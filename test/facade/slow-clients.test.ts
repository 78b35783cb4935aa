import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { http, HttpResponse } from "msw";
import { WebSocket } from "ws";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { serveMockUpstreams, type MockUpstreams } from "../helpers/mock-upstreams.js";

/**
 * Slow clients are cut (docs/security.md "Slow clients"): headers that trickle in, a body that
 * stops arriving, a request that takes too long as a whole. An answer that streams for longer
 * than any of these deadlines, and a WebSocket, are not. Deadlines of 1–3 s keep it quick; node:http
 * checks them every second.
 */

const UPSTREAM = "http://slow.upstream.test/v1";
const encoder = new TextEncoder();
let msw: MockUpstreams;
let server: TestServer;
let token: string;

beforeAll(async () => {
  // An upstream whose stream lasts 2.5 s with a 2.2 s silence: longer than every client deadline.
  msw = await serveMockUpstreams(
    http.post(`${UPSTREAM}/chat/completions`, () => {
      const frame = (content: string, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: "up", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`;
      const stream = new ReadableStream({
        async start(controller) {
          controller.enqueue(encoder.encode(frame("first")));
          await new Promise((resolve) => setTimeout(resolve, 2200));
          controller.enqueue(encoder.encode(frame(" last", "stop")));
          controller.enqueue(encoder.encode("data: [DONE]\n\n"));
          controller.close();
        },
      });
      return new HttpResponse(stream, { headers: { "content-type": "text/event-stream" } });
    }),
  );
  server = await startTestServer({
    HTTP_HEADERS_TIMEOUT_SECONDS: "1",
    HTTP_REQUEST_TIMEOUT_SECONDS: "3",
    HTTP_BODY_IDLE_TIMEOUT_SECONDS: "1",
    MODELS_JSON: JSON.stringify({
      models: { echo: { provider: "echo" }, slow: { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), upstreamModel: "m" } },
    }),
  });
  token = (await registerUser(server)).token;
}, 30_000);

afterAll(async () => {
  await server?.close();
  await msw?.close();
});

/** Opens a raw connection to the server; resolves with the time it was closed by the server and what it got. */
function rawClient(): { socket: Socket; closed: Promise<{ afterMs: number; received: string }> } {
  const { port } = new URL(server.origin);
  const socket = connect(Number(port), "127.0.0.1");
  const started = Date.now();
  let received = "";
  socket.on("data", (chunk) => (received += chunk.toString("latin1")));
  socket.on("error", () => undefined);
  const closed = new Promise<{ afterMs: number; received: string }>((resolve) =>
    socket.once("close", () => resolve({ afterMs: Date.now() - started, received })),
  );
  return { socket, closed };
}

/** Writes `parts` with `gapMs` between them while the socket stays open. */
async function trickle(socket: Socket, parts: string[], gapMs: number): Promise<void> {
  for (const part of parts) {
    if (socket.destroyed) return;
    socket.write(part);
    await new Promise((resolve) => setTimeout(resolve, gapMs));
  }
}

describe("slow clients", () => {
  it("headers trickling in a few bytes at a time are cut after HTTP_HEADERS_TIMEOUT_SECONDS", async () => {
    const { socket, closed } = rawClient();
    const headers = `GET /gateway/v1/auth/me HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ${"a".repeat(40)}\r\n`;
    void trickle(socket, headers.match(/.{1,4}/gs)!, 400);
    const { afterMs, received } = await closed;
    // 1 s deadline, checked every second: cut within about 2 s, long before the 40 parts × 0.4 s.
    expect(afterMs).toBeLessThan(3500);
    expect(received).toMatch(/^HTTP\/1\.1 408|^$/);
  });

  it("a declared body that stops arriving is cut after HTTP_BODY_IDLE_TIMEOUT_SECONDS", async () => {
    const { socket, closed } = rawClient();
    socket.write(
      `POST /gateway/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"model":"echo",`,
    );
    const { afterMs } = await closed;
    expect(afterMs).toBeGreaterThanOrEqual(900);
    expect(afterMs).toBeLessThan(2500);
  });

  it("a body that keeps trickling is cut after HTTP_REQUEST_TIMEOUT_SECONDS", async () => {
    const { socket, closed } = rawClient();
    socket.write(
      `POST /gateway/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`,
    );
    // A byte every 300 ms: never idle for the 1 s body deadline, but never done either.
    void trickle(
      socket,
      Array.from({ length: 40 }, () => " "),
      300,
    );
    const { afterMs } = await closed;
    expect(afterMs).toBeGreaterThanOrEqual(2900);
    expect(afterMs).toBeLessThan(5500);
  });

  it("a streamed answer longer than every deadline, with a silence longer than the idle one, completes", async () => {
    const res = await fetch(server.url("/gateway/v1/chat/completions"), {
      method: "POST",
      headers: { ...bearer(token), "content-type": "application/json" },
      body: JSON.stringify({ model: "slow", stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain("first");
    expect(text).toContain(" last");
    expect(text.trimEnd().endsWith("data: [DONE]"), text).toBe(true);
  });

  it("a keep-alive connection serves a second request after a first one with a body", async () => {
    const { socket, closed } = rawClient();
    const body = JSON.stringify({ model: "echo", messages: [{ role: "user", content: "hi" }] });
    const request =
      `POST /gateway/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    socket.write(request);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    socket.write(request.replace("HTTP/1.1\r\n", "HTTP/1.1\r\nConnection: close\r\n"));
    const { received } = await closed;
    expect(received.match(/HTTP\/1\.1 200/g)).toHaveLength(2);
  });

  it("an open WebSocket outlives the deadlines", async () => {
    const ws = new WebSocket(server.url("/gateway/v1/agents/stream").replace(/^http/, "ws"), { headers: bearer(token) });
    await new Promise((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(ws.readyState).toBe(WebSocket.OPEN);
    ws.close();
  });
});
