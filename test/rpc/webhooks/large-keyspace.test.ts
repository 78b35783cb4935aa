import { afterAll, beforeAll, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { startReceiver } from "../../helpers/webhook-receiver.js";
import { startPrivateRedis, type PrivateRedis } from "../../helpers/private-redis.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * Webhook delivery does not slow down with the keyspace (docs/storage.md "Indexes"): two
 * gateways, one on an empty Redis and one on a Redis holding 200,000 unrelated keys under the
 * same prefix (DEBUG POPULATE, on redis-servers of this file's own), publish events in turn;
 * the delivery latency (publish to the receiver's request) keeps its p50 within 2× of the
 * empty one's. Before the indexes, the fan-out and every poll walked the keyspace with SCAN:
 * 21 ms became 7.6 s (issue 38).
 */
const EVENTS = 40;
let empty: PrivateRedis;
let full: PrivateRedis;
let servers: { name: string; server: TestServer; token: string }[] = [];
let receiver: Awaited<ReturnType<typeof startReceiver>>;

beforeAll(async () => {
  [empty, full] = await Promise.all([startPrivateRedis(), startPrivateRedis()]);
  await full.admin.call("DEBUG", "POPULATE", "200000", "gw:kv:unrelated");
  receiver = await startReceiver();
  const env = (url: string) => ({
    STORAGE: "redis",
    REDIS_URL: url,
    REDIS_PREFIX: "gw",
    WEBHOOKS_ALLOW_PRIVATE: "true",
    // Both loops run often: a poll that walked the keyspace would show.
    WEBHOOKS_POLL_MS: "100",
    LOG_LEVEL: "error",
  });
  for (const [name, redis] of [
    ["empty", empty],
    ["full", full],
  ] as const) {
    const server = await startTestServer(env(redis.url));
    const { token } = await registerUser(server);
    const sub = await server.request("/gateway/v1/webhooks/subscriptions", {
      method: "POST",
      headers: bearer(token),
      json: { url: `http://127.0.0.1:${receiver.port}/${name}`, filter: ["bench.*"] },
    });
    expect(sub.status).toBe(201);
    receiver.secrets.push(sub.body.secret);
    servers.push({ name, server, token });
  }
}, 60_000);
afterAll(async () => {
  for (const { server } of servers) await server.close();
  servers = [];
  await receiver?.close();
  await Promise.all([empty?.stop(), full?.stop()]);
});

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

it("keeps webhook delivery p50 within 2× of an empty Redis with 200,000 unrelated keys", async () => {
  expect(await full.admin.dbsize()).toBeGreaterThan(200_000);
  const latencies: Record<string, number[]> = { empty: [], full: [] };
  for (let i = 0; i < EVENTS; i++) {
    // In turn, so both see the same load on this machine.
    for (const { name, server, token } of servers) {
      const started = performance.now();
      const res = await server.request("/gateway/v1/events", {
        method: "POST",
        headers: bearer(token),
        json: { topic: "bench", type: "bench.tick", payload: { i } },
      });
      expect(res.status).toBe(201);
      const got = (await eventually(() => receiver.received.find((r) => r.path === `/${name}` && r.body.includes(res.body.id)), 10_000))!;
      expect(got.error).toBeUndefined();
      latencies[name]!.push(got.at - started);
    }
  }
  const p50 = { empty: median(latencies.empty!), full: median(latencies.full!) };
  console.log(
    `webhook delivery p50: empty Redis ${p50.empty.toFixed(1)} ms, 200,000 unrelated keys ${p50.full.toFixed(1)} ms (${EVENTS} events each)`,
  );
  expect(p50.full).toBeLessThanOrEqual(2 * p50.empty);
}, 120_000);
