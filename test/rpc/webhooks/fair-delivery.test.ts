import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { startReceiver } from "../../helpers/webhook-receiver.js";
import { eventually } from "../../helpers/eventually.js";
import { newId } from "../../../storage/ids.js";
import { WebhookWorker } from "../../../rpc/webhooks/worker.js";
import type { WebhooksDeps } from "../../../rpc/webhooks/deps.js";

const webhooksOf = (server: TestServer) => server.composition.deps<WebhooksDeps>("webhooks");

/**
 * docs/webhooks.md "Fair delivery". Before, fan-out ran inside the publishing request: 5,000
 * subscriptions and 3 events moved another tenant's GET /auth/me from p50 3 ms to p99 3,424 ms,
 * and each publish took up to 3.7 s. Here one tenant fans out to 5,000 subscriptions on a real
 * loopback receiver while another tenant's requests and its own webhook are timed.
 */
const SUBS = 5000;
let server: TestServer;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let noisy: Awaited<ReturnType<typeof registerUser>>;
let quiet: Awaited<ReturnType<typeof registerUser>>;

beforeAll(async () => {
  receiver = await startReceiver();
  server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: "true", LOG_LEVEL: "error", QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT: String(SUBS + 10) });
  [noisy, quiet] = [await registerUser(server), await registerUser(server)];
  // One subscription through the API (the address rule, the quota), the rest written straight
  // to the repository: 5,000 HTTP creates would only make the test slow.
  const first = await server.request("/gateway/v1/webhooks/subscriptions", { method: "POST", headers: bearer(noisy.token), json: { url: `http://127.0.0.1:${receiver.port}/noisy`, filter: ["load.*"] } });
  expect(first.status).toBe(201);
  receiver.secrets.push(first.body.secret);
  const secret = WebhookWorker.newSecret();
  receiver.secrets.push(secret);
  const now = new Date().toISOString();
  for (let i = 1; i < SUBS; i++) {
    await webhooksOf(server).webhooks.putSubscription({
      id: newId("whs"),
      tenantId: noisy.user.tenantId,
      url: `http://127.0.0.1:${receiver.port}/noisy`,
      filter: ["load.*"],
      description: "",
      enabled: true,
      secret: webhooksOf(server).secrets.seal(secret),
      createdAt: now,
      updatedAt: now,
    });
  }
}, 300_000);
afterAll(async () => {
  await server?.close();
  await receiver?.close();
});

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)]!;

describe("fair webhook delivery", () => {
  it("publish answers in constant time; another tenant's p99 stays under 50 ms and its own webhook is not queued behind the fan-out", async () => {
    // The long set-up left the client's pooled connection idle past the server's keep-alive
    // timeout: one request that may meet its close (ECONNRESET) before anything is timed.
    await fetch(server.url("/healthz")).then((res) => res.arrayBuffer()).catch(() => undefined);
    const quietSub = (await server.request("/gateway/v1/webhooks/subscriptions", { method: "POST", headers: bearer(quiet.token), json: { url: `http://127.0.0.1:${receiver.port}/quiet` } })).body;
    receiver.secrets.push(quietSub.secret);
    // Warm-up, then the same requests with nothing else going on: the machine's own figure.
    const timeMe = async () => {
      const started = performance.now();
      const res = await fetch(server.url("/gateway/v1/auth/me"), { headers: bearer(quiet.token) });
      await res.arrayBuffer();
      expect(res.status).toBe(200);
      return performance.now() - started;
    };
    for (let i = 0; i < 20; i++) await timeMe();
    const baseline: number[] = [];
    for (let i = 0; i < 100; i++) baseline.push(await timeMe());

    const publishMs: number[] = [];
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      const res = await server.request("/gateway/v1/events", { method: "POST", headers: bearer(noisy.token), json: { topic: "load", type: "load.tick", payload: { i } } });
      publishMs.push(performance.now() - started);
      expect(res.status).toBe(201);
    }
    // 15,000 deliveries to make; the other tenant goes on meanwhile.
    const latencies: number[] = [];
    const stopAt = performance.now() + 8000;
    let quietDeliveredMs: number | undefined;
    const quietEvent = (async () => {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const started = performance.now();
      const event = (await server.request("/gateway/v1/events", { method: "POST", headers: bearer(quiet.token), json: { topic: "mine", type: "mine.one", payload: {} } })).body;
      await eventually(() => receiver.received.some((r) => r.headers["webhook-id"] && r.body.includes(event.id)), 10_000);
      quietDeliveredMs = performance.now() - started;
    })();
    while (performance.now() < stopAt) latencies.push(await timeMe());
    await quietEvent;
    const noisyReceived = receiver.received.filter((r) => r.body.includes("load.tick")).length;
    // eslint-disable-next-line no-console
    console.log(
      `idle GET /auth/me p50 ${percentile(baseline, 50).toFixed(1)} ms p99 ${percentile(baseline, 99).toFixed(1)} ms; publish ms ${publishMs.map((ms) => ms.toFixed(1)).join(", ")}; other tenant GET /auth/me n=${latencies.length} p50 ${percentile(latencies, 50).toFixed(1)} ms p99 ${percentile(latencies, 99).toFixed(1)} ms max ${Math.max(...latencies).toFixed(1)} ms; its webhook in ${quietDeliveredMs?.toFixed(0)} ms; noisy deliveries received in 8 s: ${noisyReceived}; RSS ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`,
    );
    // Publishing stores one job, whatever the number of subscriptions (before: up to 3.7 s each).
    for (const ms of publishMs) expect(ms).toBeLessThan(Math.max(200, 10 * percentile(baseline, 50)));
    // Under 50 ms, or (on a machine too loaded to answer anything in 50 ms) no worse than
    // twice what the same requests took with nothing else going on.
    expect(percentile(latencies, 99)).toBeLessThan(Math.max(50, 2 * percentile(baseline, 99)));
    expect(quietDeliveredMs).toBeLessThan(5000);
    // The fan-out did go on: deliveries reached the receiver, never more than the pool at once.
    expect(noisyReceived).toBeGreaterThan(100);
  }, 120_000);

  it("every one of the 15,000 deliveries is made, once", async () => {
    await eventually(async () => receiver.received.filter((r) => r.body.includes("load.tick")).length >= 3 * SUBS, 600_000);
    const got = receiver.received.filter((r) => r.body.includes("load.tick"));
    expect(new Set(got.map((r) => r.headers["webhook-id"])).size).toBe(3 * SUBS);
    expect(got.every((r) => r.error === undefined)).toBe(true);
  }, 660_000);
});

describe("claims of a dead instance", () => {
  let small: TestServer;
  let user: Awaited<ReturnType<typeof registerUser>>;
  beforeAll(async () => {
    small = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: "true", WEBHOOKS_POLL_MS: "0", WEBHOOKS_CLAIM_LEASE_MS: "3000" });
    user = await registerUser(small);
  });
  afterAll(async () => {
    vi.useRealTimers();
    await small?.close();
  });

  it("are retried once their lease ends (seconds, not the 75 s they used to wait), and a live holder's renewed claim is never taken", async () => {
    const sub = (await small.request("/gateway/v1/webhooks/subscriptions", { method: "POST", headers: bearer(user.token), json: { url: `http://127.0.0.1:${receiver.port}/lease` } })).body;
    receiver.secrets.push(sub.secret);
    const worker = webhooksOf(small).webhookWorker;
    const repo = webhooksOf(small).webhooks;
    // A delivery whose first attempt a dead instance claimed (and never made).
    const event = await webhooksOf(small).events.publish({ tenantId: user.user.tenantId, topic: "lease", type: "lease.one", source: "test", payload: {} });
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now());
    const created = new Date().toISOString();
    const delivery = await repo.putDelivery({ id: newId("msg"), tenantId: user.user.tenantId, subscriptionId: sub.id, eventId: event.id, eventType: event.type, body: JSON.stringify({ type: event.type, timestamp: event.createdAt, data: event }), status: "pending", attempts: [], nextAttemptAt: created, createdAt: created, updatedAt: created });
    expect(await repo.claimAttempt(delivery.id, 0, "wrk_dead", 3000)).toBe(true);
    expect(await worker.tick()).toBe(0);
    vi.setSystemTime(Date.now() + 2000);
    expect(await worker.tick()).toBe(0);
    // The lease (WEBHOOKS_CLAIM_LEASE_MS = 3 s) has ended: the next tick makes the attempt.
    vi.setSystemTime(Date.now() + 1100);
    expect(await worker.tick()).toBe(1);
    expect((await repo.getDelivery(delivery.id))!.status).toBe("succeeded");

    // A live holder renews: its claim outlives the lease and nobody else takes it.
    const now = new Date().toISOString();
    const live = await repo.putDelivery({ ...delivery, id: newId("msg"), status: "pending", attempts: [], nextAttemptAt: now, createdAt: now, updatedAt: now });
    expect(await repo.claimAttempt(live.id, 0, "wrk_live", 3000)).toBe(true);
    for (let i = 0; i < 4; i++) {
      vi.setSystemTime(Date.now() + 2000);
      expect(await repo.renewAttempt(live.id, 0, "wrk_live", 3000)).toBe(true);
      expect(await worker.tick()).toBe(0);
    }
    // Another holder cannot renew what it does not hold.
    expect(await repo.renewAttempt(live.id, 0, "wrk_other", 3000)).toBe(false);
  });
});
