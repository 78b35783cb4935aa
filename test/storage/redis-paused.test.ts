import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { platformAccount } from "../helpers/chat.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";

/**
 * A Redis that stops answering (docs/storage.md "When Redis stops answering"), on a
 * redis-server of this file's own paused with `CLIENT PAUSE`: every storage command has a
 * deadline (STORAGE_TIMEOUT_MS), past which the request is answered 503 in its surface's
 * envelope — a GET, a sign-in, an authenticated POST on the Gateway and on the Platform — and
 * the body-idle timer (HTTP_BODY_IDLE_TIMEOUT_SECONDS, shorter here than the deadline) does not
 * cut a POST while the service itself waits on storage. Once the pause ends, all is well again.
 */
const DEADLINE_MS = 1200;
/** What an answer may take past the deadline: a few storage calls' worth of slack, never the pause. */
const MARGIN_MS = 1500;
const PAUSE_MS = 4000;

describe("a Redis that stops answering", () => {
  let redis: PrivateRedis;
  let server: TestServer;
  let user: Awaited<ReturnType<typeof registerUser>>;
  let platformKey: string;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    server = await startTestServer({
      STORAGE: "redis",
      REDIS_URL: redis.url,
      REDIS_PREFIX: "gw",
      WEBHOOKS_POLL_MS: "0",
      STORAGE_TIMEOUT_MS: String(DEADLINE_MS),
      HTTP_BODY_IDLE_TIMEOUT_SECONDS: "1",
    });
    // The 503s are logged as storage.unavailable; background work logs its own failed calls.
    server.allowLoggedErrors(() => true);
    user = await registerUser(server);
    platformKey = (await platformAccount(server)).key;
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await redis?.stop();
  });

  const timed = async <T>(run: () => Promise<T>) => {
    const started = performance.now();
    const result = await run();
    return { result, ms: performance.now() - started };
  };
  const chat = (path: string, token: string) =>
    server.request(path, {
      method: "POST",
      headers: bearer(token),
      json: { model: "echo-1", messages: [{ role: "user", content: "hi" }] },
    });
  const calls = () => ({
    me: () => server.request("/gateway/v1/auth/me", { headers: bearer(user.token) }),
    keys: () => server.request("/gateway/v1/auth/keys", { headers: bearer(user.token) }),
    login: () => server.request("/gateway/v1/auth/login", { method: "POST", json: { email: user.email, password: user.password } }),
    gatewayChat: () => chat("/gateway/v1/chat/completions", user.token),
    platformChat: () => chat("/api/v1/chat/completions", platformKey),
  });

  it("answers a GET, a sign-in and authenticated POSTs with 503 within the deadline, and serves them again after", async () => {
    const run = calls();
    expect((await run.keys()).status).toBe(200);
    expect((await run.platformChat()).status).toBe(200);

    await redis.admin.call("CLIENT", "PAUSE", String(PAUSE_MS), "ALL");
    const pausedAt = performance.now();
    const answers = await Promise.all([run.keys(), run.login(), run.gatewayChat(), run.platformChat()].map((p) => timed(() => p)));
    const [keys, login, gatewayChat, platformChat] = answers;
    expect(performance.now() - pausedAt).toBeLessThan(PAUSE_MS - 1000);
    for (const { result, ms } of answers) {
      expect(result.status, JSON.stringify(result.body)).toBe(503);
      expect(ms).toBeLessThan(DEADLINE_MS + MARGIN_MS);
    }
    // Each in its surface's envelope; Retry-After where the surface has it (not the Platform's, docs/interface.md 7.2).
    for (const answer of [keys, login, gatewayChat]) expect(answer!.result.headers.get("retry-after")).toBe("1");
    expect(keys!.result.body.error).toMatchObject({ code: "UNAVAILABLE", message: expect.stringContaining("Storage is unavailable") });
    expect(login!.result.body.error).toMatchObject({ code: "UNAVAILABLE" });
    expect(gatewayChat!.result.body.error).toMatchObject({ code: "UNAVAILABLE" });
    expect(platformChat!.result.body.error).toMatchObject({
      type: "server_error",
      message: expect.stringContaining("Storage is unavailable"),
    });
    expect(server.logs().some((line) => line.event === "storage.unavailable" && String(line.error).includes("Command timed out"))).toBe(
      true,
    );

    // The pause ends: everything works again, with no request left hanging and no 500.
    await redis.admin.ping();
    expect((await run.me()).status).toBe(200);
    expect((await run.keys()).status).toBe(200);
    expect((await run.login()).status).toBe(200);
    expect((await run.gatewayChat()).status).toBe(200);
    expect((await run.platformChat()).status).toBe(200);
    expect(server.logs().filter((line) => line.status === 500)).toEqual([]);
  }, 30_000);
});
