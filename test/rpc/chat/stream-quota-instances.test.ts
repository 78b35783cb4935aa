import { afterAll, beforeAll, expect, it } from "vitest";
import { TEST_JWT_SECRET, TEST_DATA_SECRET, bearer, newUserBody } from "../../helpers/server.js";
import { Redis } from "ioredis";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../../helpers/redis.js";
import { startInstance, instanceRequest, type Instance } from "../../helpers/instances.js";
import { eventually } from "../../helpers/eventually.js";
import { openStream, startHeldUpstream, type HeldUpstream } from "../../helpers/held-stream.js";

/**
 * QUOTA_STREAMS_PER_KEY across two instances on one Redis (docs/quotas.md): a key's streams on
 * either instance count against one quota; the places of an instance killed mid-stream
 * (SIGKILL: nothing released) end with their lease (QUOTA_STREAM_LEASE_SECONDS=2).
 */
const prefix = uniqueRedisPrefix();
let a: Instance;
let b: Instance;
let upstream: HeldUpstream;
const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });

beforeAll(async () => {
  upstream = await startHeldUpstream();
  const env = {
    STORAGE: "redis",
    REDIS_PREFIX: prefix,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    LOG_LEVEL: "error",
    QUOTA_STREAMS_PER_KEY: "2",
    QUOTA_STREAM_LEASE_SECONDS: "2",
    MODELS_JSON: JSON.stringify({ models: { held: { provider: "openai-compatible", baseURL: upstream.url } } }),
  };
  [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
}, 60_000);
afterAll(async () => {
  upstream.finish();
  await Promise.all([a?.stop(), b?.stop()]);
  await upstream.close();
  redis.disconnect();
  await dropRedisPrefix(prefix);
});

/** Every stream place's lease end (epoch ms) in the shared Redis, by key scope and holder. */
async function leaseEnds(): Promise<Map<string, number>> {
  const ends = new Map<string, number>();
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*quota-places:streams:*:place-expiry`, "COUNT", 500);
    cursor = next;
    for (const key of keys) {
      const entries = await redis.zrange(key, 0, -1, "WITHSCORES");
      for (let i = 0; i < entries.length; i += 2) ends.set(`${key} ${entries[i]}`, Number(entries[i + 1]));
    }
  } while (cursor !== "0");
  return ends;
}

const chat = { model: "held", messages: [{ role: "user", content: "hi" }], stream: true };

it("shares one key's stream quota between instances and frees a killed instance's places when their lease ends", async () => {
  const user = (await instanceRequest(a.origin, "/gateway/v1/auth/register", { method: "POST", json: newUserBody() })).body;
  const key = (await instanceRequest(a.origin, "/gateway/v1/auth/keys", { method: "POST", token: user.token, json: { name: "k" } })).body
    .key as string;
  const stream = (origin: string, credential = key) => openStream(`${origin}/gateway/v1/chat/completions`, bearer(credential), chat);

  const onA = await stream(a.origin);
  const onB = await stream(b.origin);
  expect([onA.status, onB.status]).toEqual([200, 200]);
  for (const origin of [a.origin, b.origin]) {
    const refused = await stream(origin);
    expect(refused.status).toBe(429);
    expect(refused.body.error.details).toEqual({ quota: "streams_per_key", limit: 2, count: 2 });
  }
  // Another credential is not affected.
  const other = await stream(b.origin, user.token);
  expect(other.status).toBe(200);

  // Past a renewal (every half lease) the streams still hold their places: every lease end has moved on.
  const first = await leaseEnds();
  expect(first.size).toBe(3);
  await eventually(async () => {
    const now = await leaseEnds();
    return [...first].every(([place, end]) => (now.get(place) ?? 0) > end);
  }, 10_000);
  expect((await stream(b.origin)).status).toBe(429);

  // A is killed mid-stream: its place stays leased for a moment, then B admits.
  a.process.kill("SIGKILL");
  const killedAt = Date.now();
  expect((await stream(b.origin)).status).toBe(429);
  const admitted = (await eventually(async () => {
    const res = await stream(b.origin);
    return res.status === 200 ? res : undefined;
  }, 10_000))!;
  expect(Date.now() - killedAt).toBeGreaterThanOrEqual(500);
  upstream.finish();
  for (const res of [onB, other, admitted]) expect(await res.rest()).toContain("[DONE]");
}, 60_000);
