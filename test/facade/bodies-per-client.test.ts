import { connect, type Socket } from "node:net";
import { request, type IncomingHttpHeaders } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { eventually } from "../helpers/eventually.js";

/**
 * HTTP_BODIES_PER_CLIENT (docs/quotas.md "Bodies being read"): one client (remote address)
 * with that many request bodies still arriving gets 429 for the next, in the surface's
 * envelope, before its body is read; another client (another loopback address) is served;
 * once the client's bodies have arrived or its requests ended, it is served again.
 */
const LIMIT = 3;
let server: TestServer;
let user: Awaited<ReturnType<typeof registerUser>>;

beforeAll(async () => {
  server = await startTestServer({ HTTP_BODIES_PER_CLIENT: String(LIMIT) });
  user = await registerUser(server);
});
afterAll(async () => {
  await server?.close();
});

/** A raw connection from `from` (a loopback address) that sends a login's headers and half its body. */
function halfBody(from: string): Promise<Socket> {
  const { port } = new URL(server.origin);
  const socket = connect({ port: Number(port), host: "127.0.0.1", localAddress: from });
  socket.on("error", () => undefined);
  return new Promise((resolve) =>
    socket.once("connect", () => {
      socket.write(
        "POST /gateway/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
      );
      resolve(socket);
    }),
  );
}

/** A complete login from `from` (its own connection, node:http's `localAddress`): its status, headers and body. */
function login(from: string): Promise<{ status: number; body: any; headers: IncomingHttpHeaders }> {
  const body = JSON.stringify({ email: user.email, password: user.password });
  return new Promise((resolve, reject) => {
    const req = request(
      server.url("/gateway/v1/auth/login"),
      {
        method: "POST",
        localAddress: from,
        agent: false,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("request bodies arriving at once per client", () => {
  it("refuses the next body past the bound with 429, serves another client, and serves the client again once its bodies end", async () => {
    const slow = [];
    for (let i = 0; i < LIMIT; i++) slow.push(await halfBody("127.0.0.2"));
    await eventually(async () => (await login("127.0.0.2")).status === 429);
    const refused = await login("127.0.0.2");
    expect(refused.status).toBe(429);
    expect(refused.headers["retry-after"]).toBe("1");
    expect(refused.body.error).toMatchObject({
      code: "RATE_LIMITED",
      message: expect.stringContaining(`the limit is ${LIMIT} per client`),
      details: { limit: LIMIT, count: LIMIT },
    });
    expect(refused.body.error.message).not.toContain("HTTP_BODIES_PER_CLIENT");

    // Another client is not affected.
    expect((await login("127.0.0.3")).status).toBe(200);

    // The slow bodies go away: the client is served again.
    for (const socket of slow) socket.destroy();
    await eventually(async () => (await login("127.0.0.2")).status === 200);
    expect(
      server
        .logs()
        .some(
          (line) =>
            line.event === "http.bodies_per_client" &&
            (line.operatorNote as { variable?: string } | undefined)?.variable === "HTTP_BODIES_PER_CLIENT",
        ),
    ).toBe(true);
  });
});
