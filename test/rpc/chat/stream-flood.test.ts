import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { openStream, startHeldUpstream, type HeldUpstream } from "../../helpers/held-stream.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";

/**
 * One user cannot hold the service (docs/quotas.md "Streams in flight"): a user with several
 * keys opens 1,000 streamed chats at once on loopback, each held open by the upstream. Past the
 * per-user bound (QUOTA_STREAMS_PER_USER) beside each key's (QUOTA_STREAMS_PER_KEY) the rest are
 * refused 429 before anything is sent upstream, while another tenant's simple requests all
 * succeed promptly. On Redis, as several instances would share the places. Then the per-tenant
 * bound, and the places given back once the streams end.
 */
const KEYS = 5;
const FLOOD = 1000;
const PER_KEY = 100;
const PER_USER = 200;

describe("one user flooding streams", () => {
  let server: TestServer;
  let upstream: HeldUpstream;
  const prefix = uniqueRedisPrefix();
  beforeAll(async () => {
    upstream = await startHeldUpstream();
    const models = { held: { provider: "openai-compatible", baseURL: upstream.url } };
    server = await startTestServer({
      STORAGE: "redis",
      REDIS_PREFIX: prefix,
      MODELS_JSON: JSON.stringify({ models }),
      QUOTA_STREAMS_PER_KEY: String(PER_KEY),
      QUOTA_STREAMS_PER_USER: String(PER_USER),
      QUOTA_STREAMS_PER_TENANT: "500",
    });
  }, 60_000);
  afterAll(async () => {
    upstream.finish();
    await server?.close();
    await upstream?.close();
    await dropRedisPrefix(prefix);
  });

  // A small max_tokens, so the Free plan's allowance holds for every stream admitted.
  const chat = { model: "held", messages: [{ role: "user", content: "hi" }], stream: true, max_tokens: 16 };
  const stream = (key: string) => openStream(server.url("/gateway/v1/chat/completions"), bearer(key), chat);

  it("refuses the flood past the user's bound while another tenant's requests keep their latency", async () => {
    const flooder = await registerUser(server);
    const keys: string[] = [];
    for (let i = 0; i < KEYS; i++) {
      const made = await server.request("/gateway/v1/auth/keys", {
        method: "POST",
        headers: bearer(flooder.token),
        json: { name: `k${i}` },
      });
      expect(made.status).toBe(201);
      keys.push(made.body.key);
    }
    const other = await registerUser(server);

    // 1,000 streams at once, spread over the user's keys; each one admitted stays open.
    const flood = Promise.all(Array.from({ length: FLOOD }, (_, i) => stream(keys[i % KEYS]!)));
    // Meanwhile another tenant's simple request, 20 times, one after the other.
    const latencies: number[] = [];
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      const started = performance.now();
      const me = await server.request("/gateway/v1/auth/me", { headers: bearer(other.token) });
      latencies.push(performance.now() - started);
      statuses.push(me.status);
    }
    const streams = await flood;

    const admitted = streams.filter((s) => s.status === 200);
    const refused = streams.filter((s) => s.status === 429);
    expect(admitted.length).toBe(PER_USER);
    expect(refused.length).toBe(FLOOD - PER_USER);
    expect(upstream.open()).toBe(PER_USER);
    // The refusal names the bound in words, in the Gateway's envelope, with Retry-After.
    const byUser = refused.find((s) => s.body.error.details.quota === "streams_per_user")!;
    expect(byUser.body.error).toEqual({
      code: "RATE_LIMITED",
      message: expect.stringMatching(
        /^Quota reached: this user has \d+ stream\(s\) in flight, all of their keys together, the most allowed \(limit 200\)/,
      ),
      requestId: expect.any(String),
      details: { quota: "streams_per_user", limit: PER_USER, count: expect.any(Number) },
    });
    expect(byUser.body.error.message).not.toMatch(/QUOTA_|[A-Z]{3,}_[A-Z]{3,}/);
    expect(byUser.headers.get("retry-after")).toBe("1");
    // The operator's log line names the variable.
    expect(server.logs().some((line) => JSON.stringify(line).includes('"variable":"QUOTA_STREAMS_PER_USER"'))).toBe(true);

    // The other tenant: every request answered, promptly.
    expect(statuses).toEqual(Array(20).fill(200));
    const sorted = [...latencies].sort((a, b) => a - b);
    expect(sorted[10]!).toBeLessThan(1000);
    expect(sorted[19]!).toBeLessThan(5000);

    // Once the streams end, their places are free again: the user streams.
    upstream.finish();
    await Promise.all(admitted.map((s) => s.rest()));
    const again = await stream(keys[0]!);
    expect(again.status).toBe(200);
    again.cancel();
  }, 60_000);

  it("bounds a tenant's streams, all of its users and keys together", async () => {
    const tenantServer = await startTestServer({
      MODELS_JSON: JSON.stringify({ models: { held: { provider: "openai-compatible", baseURL: upstream.url } } }),
      QUOTA_STREAMS_PER_KEY: "2",
      QUOTA_STREAMS_PER_USER: "10",
      QUOTA_STREAMS_PER_TENANT: "3",
    });
    try {
      const user = await registerUser(tenantServer);
      const made = await tenantServer.request("/gateway/v1/auth/keys", {
        method: "POST",
        headers: bearer(user.token),
        json: { name: "k" },
      });
      const open = (token: string) => openStream(tenantServer.url("/gateway/v1/chat/completions"), bearer(token), chat);
      const first = [await open(made.body.key), await open(made.body.key), await open(user.token)];
      expect(first.map((s) => s.status)).toEqual([200, 200, 200]);
      const refused = await open(user.token);
      expect(refused.status).toBe(429);
      expect(refused.body.error.details).toEqual({ quota: "streams_per_tenant", limit: 3, count: 3 });
      expect(refused.body.error.message).toContain(
        "this tenant has 3 stream(s) in flight, all of its users together, the most allowed (limit 3)",
      );
      // The refused stream took no place: one that ends frees one for the next.
      first[0]!.cancel();
      let next = await open(user.token);
      for (let i = 0; next.status !== 200 && i < 50; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        next = await open(user.token);
      }
      expect(next.status).toBe(200);
      for (const s of [...first, next]) s.cancel();
    } finally {
      await tenantServer.close();
    }
  });
});
