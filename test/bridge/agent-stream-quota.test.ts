import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { agentStreamUrl, connectStream, type StreamClient } from "../helpers/agent-stream.js";
import { eventually } from "../helpers/eventually.js";
import { openSocket } from "../helpers/vm.js";

/**
 * QUOTA_AGENT_SOCKETS_PER_USER and QUOTA_AGENT_SOCKETS_PER_TENANT (docs/quotas.md): open agent
 * stream sockets per user, whichever credential opened them; one more is refused in the
 * upgrade with 429 in the Gateway's envelope, naming the bound in words; another tenant's user
 * is not affected; a socket that closes gives its place back.
 */
describe("agent stream sockets per user", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ QUOTA_AGENT_SOCKETS_PER_USER: "2", QUOTA_AGENT_SOCKETS_PER_TENANT: "10" });
  });
  afterAll(async () => {
    await server.close();
  });

  it("refuses a user's third socket with 429, lets another tenant's user connect, and frees the place on close", async () => {
    const alice = await registerUser(server);
    const bob = await registerUser(server);
    const key = await server.request("/gateway/v1/auth/keys", {
      method: "POST",
      headers: { authorization: `Bearer ${alice.token}` },
      json: { name: "k" },
    });
    const sockets: StreamClient[] = [
      await connectStream(server.origin, { token: alice.token }),
      await connectStream(server.origin, { headers: { "x-api-key": key.body.key } }),
    ];

    const refused = await openSocket(agentStreamUrl(server.origin), { headers: { authorization: `Bearer ${alice.token}` } }).catch(
      (error) => error,
    );
    expect(refused.status).toBe(429);
    const body = JSON.parse(refused.body);
    expect(body.error).toMatchObject({
      code: "RATE_LIMITED",
      message: "Quota reached: this user has 2 agent stream socket(s) open, the most allowed (limit 2); close one first",
      details: { quota: "agent_sockets_per_user", limit: 2, count: 2 },
    });
    expect(body.error.message).not.toContain("QUOTA_");

    const bobs = await connectStream(server.origin, { token: bob.token });
    await sockets[0]!.close();
    await eventually(async () => {
      const again = await connectStream(server.origin, { token: alice.token }).catch(() => undefined);
      if (again) sockets.push(again);
      return again !== undefined;
    }, 5000);
    for (const socket of [...sockets.slice(1), bobs]) await socket.close();
  });
});
