import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../storage/store.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { platformAccount } from "../helpers/chat.js";
import { eventually } from "../helpers/eventually.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";

/**
 * What the service needs of Redis and how it behaves when Redis cannot serve (docs/storage.md
 * "Redis in production", "When Redis is down or full"), on redis-servers of this file's own:
 * the settings checked at start, named connections, /readyz and every request answering 503
 * (never 500) while Redis refuses writes or is unreachable, and all well again once it is back.
 * A start refused for maxmemory-policy and REDIS_URL's checks are in test/scripts/start-process.test.ts.
 */
const storeOptions = (url: string, extra: Record<string, unknown> = {}) => ({
  STORAGE: "redis" as const,
  DATA_DIR: "/nonexistent",
  REDIS_URL: url,
  REDIS_PREFIX: "gw",
  ...extra,
});

describe("the settings checked at start", () => {
  it("warns that a Redis without AOF or save points keeps nothing on disk, and names its connections", async () => {
    const redis = await startPrivateRedis();
    try {
      const store = await openStore(storeOptions(redis.url));
      const events = store.duplicateRedis!("events");
      await events.ping();
      expect(store.notices.join("\n")).toMatch(/keeps nothing on disk \(appendonly no, no save points\)/);
      const names = ((await redis.admin.client("LIST")) as string).match(/ name=(\S+)/g)!.map((entry) => entry.slice(6));
      expect(
        names
          .filter((name) => name.startsWith("gw:"))
          .map((name) => name.split(":")[1])
          .sort(),
      ).toEqual(["events", "main", "subscriber"]);
      await store.close();
      // With AOF on, nothing to say.
      await redis.admin.config("SET", "appendonly", "yes");
      const durable = await openStore(storeOptions(redis.url));
      expect(durable.notices).toEqual([]);
      await durable.close();
    } finally {
      await redis.stop();
    }
  });

  it("says that Redis refused REDIS_URL's password, never printing it", async () => {
    const redis = await startPrivateRedis(["--requirepass", "right-password-1"]);
    try {
      for (const url of [redis.url, redis.url.replace("//", "//:wrong-password-2@")]) {
        const error = await openStore(storeOptions(url)).then(
          () => new Error("opened"),
          (caught: Error) => caught,
        );
        expect(error).toMatchObject({ code: "REDIS_SETUP" });
        expect(error.message).toMatch(/: refused the user and password in REDIS_URL \((NOAUTH|WRONGPASS) /);
        expect(error.message).not.toContain("wrong-password-2");
      }
      const store = await openStore(storeOptions(redis.url.replace("//", "//:right-password-1@")));
      await expect(store.probe()).resolves.toEqual({ ok: true });
      await store.close();
    } finally {
      await redis.stop();
    }
  });

  it("runs on an evicting Redis only when told to, and says so", async () => {
    const redis = await startPrivateRedis(["--maxmemory-policy", "volatile-lru"]);
    try {
      await expect(openStore(storeOptions(redis.url))).rejects.toMatchObject({
        code: "REDIS_SETUP",
        message: expect.stringContaining("maxmemory-policy volatile-lru"),
      });
      const store = await openStore(storeOptions(redis.url, { REDIS_ALLOW_EVICTION: true }));
      expect(store.notices.join("\n")).toContain("running anyway because REDIS_ALLOW_EVICTION=true");
      await store.close();
    } finally {
      await redis.stop();
    }
  });
});

describe("a Redis that cannot serve", () => {
  let redis: PrivateRedis;
  let server: TestServer;
  let user: Awaited<ReturnType<typeof registerUser>>;
  let platformKey: string;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    server = await startTestServer({ STORAGE: "redis", REDIS_URL: redis.url, REDIS_PREFIX: "gw", WEBHOOKS_POLL_MS: "0" });
    // Errors logged while Redis is away are expected here (the 503s are logged as storage.unavailable).
    server.allowLoggedErrors(() => true);
    user = await registerUser(server);
    platformKey = (await platformAccount(server)).key;
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await redis?.stop();
  });

  const chat = (path: string, token: string) =>
    server.request(path, {
      method: "POST",
      headers: bearer(token),
      json: { model: "echo-1", messages: [{ role: "user", content: "hi" }] },
    });

  async function expectUnavailable() {
    const ready = await server.request("/readyz");
    expect(ready.status).toBe(503);
    const platform = await chat("/api/v1/chat/completions", platformKey);
    expect(platform.status, JSON.stringify(platform.body)).toBe(503);
    expect(platform.body.error).toMatchObject({ message: expect.stringContaining("Storage is unavailable") });
    const gateway = await chat("/gateway/v1/chat/completions", user.token);
    expect(gateway.status, JSON.stringify(gateway.body)).toBe(503);
    expect(gateway.body.error).toMatchObject({ code: "UNAVAILABLE" });
    expect(gateway.headers.get("retry-after")).toBe("1");
    const login = await server.request("/gateway/v1/auth/login", { method: "POST", json: { email: user.email, password: user.password } });
    expect(login.status).toBeGreaterThanOrEqual(503);
    return ready.body.reason as string;
  }

  it("answers /readyz and every request with 503 while Redis refuses writes past maxmemory, and recovers", async () => {
    expect((await chat("/api/v1/chat/completions", platformKey)).status).toBe(200);
    await redis.admin.config("SET", "maxmemory", "1");
    try {
      expect(await expectUnavailable()).toMatch(/OOM/);
    } finally {
      await redis.admin.config("SET", "maxmemory", "0");
    }
    expect((await server.request("/readyz")).status).toBe(200);
    expect((await chat("/api/v1/chat/completions", platformKey)).status).toBe(200);
    expect(server.logs().some((line) => line.event === "storage.unavailable")).toBe(true);
  });

  it("answers 503, not 500 or a hang, while Redis is unreachable, and is ready again once it is back", async () => {
    const port = redis.port;
    await redis.stop();
    try {
      await expectUnavailable();
    } finally {
      redis = await startPrivateRedis([], { port });
    }
    // Its data is gone with it (no persistence here), but the service is ready again by itself.
    await eventually(async () => (await server.request("/readyz")).status === 200, 10_000);
    expect(server.logs().filter((line) => line.status === 500)).toEqual([]);
  }, 30_000);
});
