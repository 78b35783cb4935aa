import { afterAll, beforeAll, expect, it } from "vitest";
import { TEST_JWT_SECRET, TEST_DATA_SECRET, newUserBody } from "../../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";
import { instanceRequest, startInstance, type Instance } from "../../helpers/instances.js";
import { startReceiver } from "../../helpers/webhook-receiver.js";
import { eventually } from "../../helpers/eventually.js";

const prefix = uniqueRedisPrefix();
let a: Instance;
let b: Instance;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let token: string;

beforeAll(async () => {
  receiver = await startReceiver();
  const env = {
    STORAGE: "redis",
    REDIS_PREFIX: prefix,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    LOG_LEVEL: "error",
    // The receiver is on loopback; both instances poll often so they race for every due attempt.
    WEBHOOKS_ALLOW_PRIVATE: "true",
    WEBHOOKS_POLL_MS: "50",
  };
  [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
  token = (await instanceRequest(a.origin, "/gateway/v1/auth/register", { method: "POST", json: newUserBody() })).body.token;
}, 60_000);
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await receiver?.close();
  await dropRedisPrefix(prefix);
});

it("two instances on one Redis share a consumer group: every event leased once, all acked", async () => {
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const target = i % 2 ? a : b;
    ids.push(
      (
        await instanceRequest(target.origin, "/gateway/v1/events", {
          method: "POST",
          token,
          json: { topic: "jobs", type: "job.queued", payload: { i } },
        })
      ).body.id,
    );
  }
  const seen: string[] = [];
  const drain = async (origin: string) => {
    for (;;) {
      const batch = (
        await instanceRequest(origin, "/gateway/v1/events/consume?topic=jobs&consumer=workers&max=4&leaseSeconds=60", {
          method: "POST",
          token,
        })
      ).body.data as { id: string; leaseId: string }[];
      if (batch.length === 0) return;
      for (const event of batch) {
        seen.push(event.id);
        const acked = await instanceRequest(origin === a.origin ? b.origin : a.origin, `/gateway/v1/events/${event.id}/ack`, {
          method: "POST",
          token,
          json: { consumer: "workers", leaseId: event.leaseId },
        });
        expect(acked.status).toBe(200);
      }
    }
  };
  await Promise.all([drain(a.origin), drain(b.origin), drain(a.origin), drain(b.origin)]);
  expect(seen.sort()).toEqual([...ids].sort());
  expect(new Set(seen).size).toBe(ids.length);
});

it("each due webhook attempt is made by exactly one instance, first attempts and retries alike", async () => {
  const sub = (
    await instanceRequest(a.origin, "/gateway/v1/webhooks/subscriptions", {
      method: "POST",
      token,
      json: { url: `http://127.0.0.1:${receiver.port}/multi`, filter: ["pay.*"] },
    })
  ).body;
  receiver.secrets.push(sub.secret);
  const count = 10;
  // Every first attempt fails, so each delivery is retried ~5 s later while both instances poll.
  receiver.answers.push(...Array.from({ length: count }, () => 500));
  for (let i = 0; i < count; i++) {
    await instanceRequest(i % 2 ? a.origin : b.origin, "/gateway/v1/events", {
      method: "POST",
      token,
      json: { topic: "pay", type: "pay.done", payload: { i } },
    });
  }
  const deliveries = await eventually(async () => {
    const list = (await instanceRequest(b.origin, `/gateway/v1/webhooks/deliveries?subscriptionId=${sub.id}`, { token })).body.data as {
      id: string;
      status: string;
      attemptCount: number;
    }[];
    return list.length === count && list.every((d) => d.status === "succeeded") ? list : undefined;
  }, 15_000);
  const perDelivery = new Map<string, number>();
  for (const request of receiver.received.filter((r) => r.body.includes("pay.done"))) {
    expect(request.error).toBeUndefined();
    const id = String(request.headers["webhook-id"]);
    perDelivery.set(id, (perDelivery.get(id) ?? 0) + 1);
  }
  for (const delivery of deliveries!) {
    expect(delivery.attemptCount).toBe(2);
    expect(perDelivery.get(delivery.id)).toBe(2);
  }
}, 30_000);
