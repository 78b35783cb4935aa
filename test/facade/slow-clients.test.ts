import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { connectVm, vmSocketUrl } from "../helpers/vm.js";

/**
 * docs/security.md "Slow clients". Before, 300 sockets sending headers a few bytes every 2 s
 * and 200 sending a declared 100 kB body slowly were never closed. Short deadlines here:
 * headers 500 ms, whole request 1.5 s, body idle 400 ms.
 */
const ENV = { HTTP_HEADERS_TIMEOUT_MS: "500", HTTP_REQUEST_TIMEOUT_MS: "1500", HTTP_BODY_IDLE_TIMEOUT_MS: "400" };
let server: TestServer;
let provider: Server;
let token: string;

beforeAll(async () => {
  // An OpenAI-compatible provider streaming one chunk every 700 ms (longer than the idle
  // deadline) for 3.5 s (longer than the request deadline).
  provider = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let sent = 0;
      const timer = setInterval(() => {
        sent += 1;
        const chunk = { id: "c", object: "chat.completion.chunk", created: 0, model: "slow", choices: [{ index: 0, delta: { content: `t${sent} ` }, finish_reason: sent === 5 ? "stop" : null }] };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        if (sent === 5) {
          clearInterval(timer);
          res.write(`data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "slow", choices: [], usage: { prompt_tokens: 1, completion_tokens: 5, total_tokens: 6 } })}\n\n`);
          res.end("data: [DONE]\n\n");
        }
      }, 700);
    });
  });
  await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(provider.address() as { port: number }).port}/v1`;
  server = await startTestServer({ ...ENV, MODELS_JSON: JSON.stringify({ models: { slow: { provider: "openai-compatible", baseURL: base } } }) });
  token = (await registerUser(server)).token;
});
afterAll(async () => {
  await server?.close();
  provider?.closeAllConnections();
  await new Promise((resolve) => provider?.close(resolve));
});

interface Cut {
  /** ms from the first byte sent to the socket's close. */
  afterMs: number;
  answer: string;
}

/** Opens a socket, writes `first`, then `next()` every `everyMs` until the server closes it (or 10 s). */
function trickle(first: string, next: (() => string) | undefined, everyMs: number): Promise<Cut> {
  const { port } = new URL(server.origin);
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(Number(port), "127.0.0.1");
    let answer = "";
    let started = 0;
    let timer: NodeJS.Timeout | undefined;
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after 10 s; got ${JSON.stringify(answer)}`));
    }, 10_000);
    socket.on("connect", () => {
      started = performance.now();
      socket.write(first);
      if (next) timer = setInterval(() => socket.writable && socket.write(next()), everyMs);
    });
    socket.on("data", (chunk) => (answer += chunk.toString()));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve({ afterMs: performance.now() - started, answer });
    });
  });
}

describe("slow clients", () => {
  it("cuts sockets sending their headers a few bytes at a time once the headers deadline passes (408)", async () => {
    let n = 0;
    const cuts = await Promise.all(Array.from({ length: 30 }, () => trickle("GET /gateway/v1/auth/me HTTP/1.1\r\nHost: 127.0.0.1\r\n", () => `X-Slow-${(n += 1)}: a\r\n`, 100)));
    for (const cut of cuts) {
      expect(cut.answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(cut.afterMs).toBeGreaterThanOrEqual(450);
      expect(cut.afterMs).toBeLessThan(1500);
    }
  });

  it("cuts a declared body sent slowly but steadily at the whole-request deadline (408)", async () => {
    const head = `POST /gateway/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"email":"`;
    const cuts = await Promise.all(Array.from({ length: 20 }, () => trickle(head, () => "aaaaaaaaaa", 100)));
    for (const cut of cuts) {
      expect(cut.answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(cut.afterMs).toBeGreaterThanOrEqual(1400);
      expect(cut.afterMs).toBeLessThan(3000);
    }
  });

  it("cuts a body that stops arriving at the idle deadline (408), well before the whole-request one", async () => {
    const head = `POST /gateway/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"email":"a`;
    const cuts = await Promise.all(Array.from({ length: 20 }, () => trickle(head, undefined, 0)));
    for (const cut of cuts) {
      expect(cut.answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(cut.afterMs).toBeGreaterThanOrEqual(350);
      expect(cut.afterMs).toBeLessThan(1400);
    }
  });

  it("leaves a request whose body came in full alone, and serves the next request on the connection", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "auth.me", params: {} });
    const res = await fetch(server.url("/rpc"), { method: "POST", headers: { ...bearer(token), "content-type": "application/json" }, body });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { result: { user: unknown } }).result.user).toBeDefined();
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await fetch(server.url("/gateway/v1/auth/me"), { headers: bearer(token) })).status).toBe(200);
  });

  it("never cuts an established SSE answer that is quiet longer than the idle deadline and lasts longer than the request deadline", async () => {
    const started = performance.now();
    const res = await fetch(server.url("/gateway/v1/chat/completions"), {
      method: "POST",
      headers: { ...bearer(token), "content-type": "application/json" },
      body: JSON.stringify({ model: "slow", messages: [{ role: "user", content: "x" }], stream: true }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(performance.now() - started).toBeGreaterThan(3000);
    for (let i = 1; i <= 5; i += 1) expect(text).toContain(`t${i} `);
    expect(text).toContain("data: [DONE]");
  });

  it("never cuts an established WebSocket (a VM socket) quiet past every deadline", async () => {
    const vm = await connectVm(vmSocketUrl(server.origin, "slow-agent", { vmId: "slow-vm" }), token);
    let closed = false;
    void vm.closed.then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(closed).toBe(false);
    await vm.register([{ name: "still_here" }]);
    await vm.close();
  });
});
