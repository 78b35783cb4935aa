import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { WebhooksDeps } from "../../../rpc/webhooks/deps.js";
import { FairQueue } from "../../../rpc/webhooks/fair-queue.js";
import { deliveryIdOf, WebhookWorker } from "../../../rpc/webhooks/worker.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { startReceiver } from "../../helpers/webhook-receiver.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * Fair webhook delivery (docs/webhooks.md "Fair delivery"): publishing stores one fan-out job and
 * answers at once; fan-outs and attempts run through a bounded queue that takes tenants in turn,
 * so one tenant fanning out to 5,000 subscriptions does not slow another tenant's requests or
 * deliveries. Work held by an instance that died is taken over within the lease.
 */

const SUBSCRIPTIONS = 5_000;
/** p99 of `GET /auth/me` on a quiet machine, without any fan-out (a few ms; docs/webhooks.md "Fair delivery"). */
const QUIET_P99_MS = 10;
let server: TestServer;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let noisy: Awaited<ReturnType<typeof registerUser>>;
let quiet: Awaited<ReturnType<typeof registerUser>>;
/** The 5,000-subscription receiver runs in a process of its own, as a real receiver would. */
let sink: ChildProcess;
let sinkPort: number;

const sinkStats = async (): Promise<Record<string, { count: number; unique: number; types: string[] }>> =>
  (await (await fetch(`http://127.0.0.1:${sinkPort}/_stats`)).json()) as Record<string, { count: number; unique: number; types: string[] }>;

beforeAll(async () => {
  sink = spawn(process.execPath, ["--import", "tsx", "test/fixtures/webhook-sink.ts"], { stdio: ["ignore", "pipe", "inherit"] });
  sinkPort = await new Promise<number>((resolve, reject) => {
    sink.stdout!.on("data", (chunk) => {
      const port = /PORT (\d+)/.exec(String(chunk))?.[1];
      if (port) resolve(Number(port));
    });
    sink.once("exit", () => reject(new Error("webhook sink exited")));
  });
  receiver = await startReceiver();
  server = await startTestServer({
    WEBHOOKS_ALLOW_PRIVATE: "true",
    WEBHOOKS_POLL_MS: "0",
    WEBHOOKS_LEASE_SECONDS: "1",
    WEBHOOKS_CONCURRENCY: "16",
    WEBHOOKS_TENANT_CONCURRENCY: "4",
    // The quiet tenant sends a few thousand requests a minute while it is measured.
    GATEWAY_API_RATE_LIMIT_RPM: "1000000",
    GATEWAY_TENANT_RATE_LIMIT_RPM: "1000000",
  });
  [noisy, quiet] = await Promise.all([registerUser(server), registerUser(server)]);
}, 30_000);
afterAll(async () => {
  await server?.close();
  await receiver?.close();
  sink?.kill();
});

const deps = () => server.composition.deps<WebhooksDeps>("webhooks");

/** Stores `count` subscriptions of a tenant straight in the repository (the API would check each URL: slow setup). */
async function manySubscriptions(tenantId: string, count: number, path: string, port = receiver.port): Promise<void> {
  const now = new Date().toISOString();
  const secret = WebhookWorker.newSecret();
  receiver.secrets.push(secret);
  const sealed = deps().secrets.seal(secret);
  for (let i = 0; i < count; i += 250) {
    await Promise.all(
      Array.from({ length: Math.min(250, count - i) }, (_, j) =>
        deps().webhooks.putSubscription({
          id: `whs_${path.slice(1)}${i + j}`,
          tenantId,
          url: `http://127.0.0.1:${port}${path}`,
          filter: ["*"],
          description: "",
          enabled: true,
          secret: sealed,
          createdAt: now,
          updatedAt: now,
        }),
      ),
    );
  }
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

describe("fair webhook delivery", () => {
  it("one tenant fanning out to 5,000 subscriptions: publish answers at once, another tenant's p99 stays under 50 ms and its delivery is not queued behind", async () => {
    const publish = async (who: { token: string }, type: string) => {
      const started = performance.now();
      const res = await server.request("/gateway/v1/events", {
        method: "POST",
        headers: bearer(who.token),
        json: { topic: type.split(".")[0], type, payload: {} },
      });
      expect(res.status).toBe(201);
      return performance.now() - started;
    };
    const me = async (into: number[]) => {
      const t = performance.now();
      const res = await server.request("/gateway/v1/auth/me", { headers: bearer(quiet.token) });
      into.push(performance.now() - t);
      expect(res.status).toBe(200);
    };
    const noisyCount = async () => (await sinkStats())["/noisy"]?.count ?? 0;
    // The same requests without any fan-out, just before it and just after it: what the
    // machine itself adds (other processes on its cores), measured in this run.
    const quietBefore: number[] = [];
    for (let i = 0; i < 300; i++) await me(quietBefore);
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    // Publishing with no subscription, then with 5,000: the same work (one stored job).
    const before: number[] = [];
    for (let i = 0; i < 5; i++) before.push(await publish(noisy, "warm.up"));
    await manySubscriptions(noisy.user.tenantId, SUBSCRIPTIONS, "/noisy", sinkPort);
    const quietSub = await server.request("/gateway/v1/webhooks/subscriptions", {
      method: "POST",
      headers: bearer(quiet.token),
      json: { url: `http://127.0.0.1:${receiver.port}/quiet`, filter: ["*"] },
    });
    expect(quietSub.status).toBe(201);
    receiver.secrets.push(quietSub.body.secret);
    const publishMs = await publish(noisy, "blast.sent");
    // It was 3.7 s when the fan-out ran in the request.
    expect(publishMs).toBeLessThan(2 * median(before) + 200);

    // For as long as the noisy tenant's 5,000 deliveries go out, the quiet tenant works as usual
    // (and publishes an event of its own, whose delivery goes out at its next turn).
    const during: number[] = [];
    const fanOutStarted = performance.now();
    const quietEvent = publish(quiet, "calm.one");
    let noisyWhenQuietArrived: number | undefined;
    const deadline = performance.now() + 120_000;
    for (let done = 0; done < SUBSCRIPTIONS && performance.now() < deadline; ) {
      for (let i = 0; i < 25; i++) await me(during);
      done = await noisyCount();
      if (noisyWhenQuietArrived === undefined && receiver.received.some((r) => r.path === "/quiet")) noisyWhenQuietArrived = done;
    }
    const fanOutSeconds = (performance.now() - fanOutStarted) / 1000;
    await quietEvent;
    const quietAfter: number[] = [];
    for (let i = 0; i < 300; i++) await me(quietAfter);

    const p99 = percentile(during, 99);
    const machineP99 = percentile([...quietBefore, ...quietAfter], 99);
    const figures =
      `p50 ${percentile(during, 50).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${Math.max(...during).toFixed(1)} ms over ${during.length} requests ` +
      `during the fan-out (${fanOutSeconds.toFixed(1)} s); without it p50 ${percentile([...quietBefore, ...quietAfter], 50).toFixed(1)} ms, p99 ${machineP99.toFixed(1)} ms`;
    console.log(`fair delivery: ${figures}`);
    // Under 50 ms at p99 (before the fair queue: 3,424 ms). On a quiet machine the same requests
    // without a fan-out take under QUIET_P99_MS at p99, and the bound is 50 ms; what this run's
    // own requests without a fan-out show above that (other processes on the machine's cores)
    // is not the fan-out's doing and is added to the bound.
    expect(p99, figures).toBeLessThan(50 + Math.max(0, machineP99 - QUIET_P99_MS));
    // The quiet tenant's delivery went out long before the noisy backlog drained.
    await eventually(() => receiver.received.some((r) => r.path === "/quiet"), 5_000);
    expect(noisyWhenQuietArrived ?? SUBSCRIPTIONS).toBeLessThan(SUBSCRIPTIONS);
    // Everyone gets theirs, once; nothing for the warm-up events published before the subscriptions.
    await eventually(async () => (await noisyCount()) >= SUBSCRIPTIONS, 120_000);
    expect((await sinkStats())["/noisy"]).toEqual({ count: SUBSCRIPTIONS, unique: SUBSCRIPTIONS, types: ["blast.sent"] });
    expect(await deps().webhooks.fanOutsDue(Number.MAX_SAFE_INTEGER, 1000)).toEqual([]);
  }, 300_000);

  it("a fan-out left by an instance that died is taken over once its lease expires, and no delivery is stored twice", async () => {
    const { webhooks: repo, webhookWorker: worker } = deps();
    await manySubscriptions(quiet.user.tenantId, 3, "/takeover");
    const event = {
      id: "evt_takeover1",
      tenantId: quiet.user.tenantId,
      topic: "take",
      type: "take.over",
      source: "test",
      payload: {},
      createdAt: new Date().toISOString(),
    };
    // The dead instance stored the job, claimed it and had stored one delivery.
    await repo.putFanOut({ eventId: event.id, tenantId: event.tenantId, event: event as never, createdAt: event.createdAt }, Date.now());
    expect(await repo.claimFanOut(event.id, "wrk_dead", 1000)).toBe(true);
    const first = (await repo.listSubscriptions(quiet.user.tenantId)).find((sub) => sub.id === "whs_takeover0")!;
    await repo.putDelivery({
      id: deliveryIdOf(event.id, first.id),
      tenantId: event.tenantId,
      subscriptionId: first.id,
      eventId: event.id,
      eventType: event.type,
      body: "{}",
      status: "succeeded",
      attempts: [],
      nextAttemptAt: null,
      createdAt: event.createdAt,
      updatedAt: event.createdAt,
    });
    const pending = async () => (await repo.fanOutsDue(Number.MAX_SAFE_INTEGER, 1000)).filter((job) => job.eventId === event.id);
    await worker.tick();
    expect(await pending()).toHaveLength(1); // still claimed by the dead instance
    // Once the dead instance's claim runs out, a tick takes the job over and finishes it.
    await eventually(async () => {
      await worker.tick();
      return (await pending()).length === 0;
    });
    const deliveries = (await repo.listDeliveries(quiet.user.tenantId)).filter(
      (d) => d.eventId === event.id && d.subscriptionId.startsWith("whs_takeover"),
    );
    expect(deliveries.map((d) => d.subscriptionId).sort()).toEqual(["whs_takeover0", "whs_takeover1", "whs_takeover2"]);
    await eventually(() => receiver.received.filter((r) => r.path === "/takeover").length === 2);
  });

  it("an attempt claimed by an instance that died is made by another within seconds", async () => {
    const { webhooks: repo, webhookWorker: worker } = deps();
    const sub = (
      await server.request("/gateway/v1/webhooks/subscriptions", {
        method: "POST",
        headers: bearer(quiet.token),
        json: { url: `http://127.0.0.1:${receiver.port}/orphan`, filter: ["orphan.*"] },
      })
    ).body;
    receiver.secrets.push(sub.secret);
    const now = new Date().toISOString();
    const id = "msg_orphan1";
    await repo.putDelivery({
      id,
      tenantId: quiet.user.tenantId,
      subscriptionId: sub.id,
      eventId: "evt_orphan1",
      eventType: "orphan.left",
      body: "{}",
      status: "pending",
      attempts: [],
      nextAttemptAt: now,
      createdAt: now,
      updatedAt: now,
    });
    expect(await repo.claimAttempt(id, 0, "wrk_dead", 1000)).toBe(true);
    expect(await worker.tick()).toBe(0);
    // Once the dead instance's claim runs out, a tick makes the attempt.
    await eventually(async () => (await worker.tick()) === 1);
    expect((await repo.getDelivery(id))!.status).toBe("succeeded");
  });
});

describe("shutdown", () => {
  it.each([
    ["in a delivery thread", 1],
    ["on the service's loop", 0],
  ])(
    "a worker closed with deliveries waiting for their turn leaves them due: no attempt is made and cut (attempts %s)",
    async (_, threads) => {
      const { webhooks: repo, secrets, resolveHost } = deps();
      const worker = new WebhookWorker({
        config: {
          WEBHOOKS_ALLOW_PRIVATE: true,
          WEBHOOKS_TIMEOUT_SECONDS: 5,
          WEBHOOKS_POLL_MS: 0,
          WEBHOOKS_CONCURRENCY: 1,
          WEBHOOKS_TENANT_CONCURRENCY: 1,
          WEBHOOKS_LEASE_SECONDS: 5,
          WEBHOOKS_SEND_THREADS: threads,
        },
        log: { info() {}, warn() {}, error() {} },
        repo,
        secrets,
        resolveHost,
        onFailed: async () => undefined,
      });
      const path = `/shutdown${threads}`;
      await manySubscriptions(noisy.user.tenantId, 1, path, sinkPort);
      const sub = (await repo.getSubscription(`whs_shutdown${threads}0`))!;
      const now = new Date().toISOString();
      const ids = Array.from({ length: 30 }, (_, i) => `msg_shutdown${threads}x${i}`);
      for (const id of ids) {
        await repo.putDelivery({
          id,
          tenantId: noisy.user.tenantId,
          subscriptionId: sub.id,
          eventId: `evt_${id}`,
          eventType: "shut.down",
          body: "{}",
          status: "pending",
          attempts: [],
          nextAttemptAt: now,
          createdAt: now,
          updatedAt: now,
        });
      }
      const ticked = worker.tick();
      await eventually(() => worker.queue.running > 0);
      await worker.close();
      await ticked;
      const after = await Promise.all(ids.map((id) => repo.getDelivery(id)));
      const untouched = after.filter((d) => d!.attempts.length === 0);
      expect(untouched.length).toBeGreaterThan(20);
      for (const d of untouched) expect(d).toMatchObject({ status: "pending" });
      expect(after.filter((d) => d!.attempts.some((a) => a.error === "interrupted by shutdown")).length).toBeLessThanOrEqual(1);
    },
  );
});

describe("FairQueue", () => {
  it("takes tenants in turn and runs at most perTenant of one tenant and total in all", async () => {
    const queue = new FairQueue(3, 2);
    const order: string[] = [];
    const running = { all: 0, a: 0, max: 0, maxA: 0 };
    const release: (() => void)[] = [];
    const task = (tenant: string, n: number) => () => {
      order.push(`${tenant}${n}`);
      running.all += 1;
      if (tenant === "a") running.a += 1;
      running.max = Math.max(running.max, running.all);
      running.maxA = Math.max(running.maxA, running.a);
      return new Promise<void>((resolve) =>
        release.push(() => {
          running.all -= 1;
          if (tenant === "a") running.a -= 1;
          resolve();
        }),
      );
    };
    const done = [
      ...Array.from({ length: 6 }, (_, n) => queue.push("a", task("a", n))),
      queue.push("b", task("b", 0)),
      queue.push("c", task("c", 0)),
    ];
    // a0 and a1 fill a's two slots; the third slot goes to b, not to a's backlog.
    expect(order).toEqual(["a0", "a1", "b0"]);
    while (release.length) {
      release.shift()!();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(done);
    expect(order.indexOf("c0")).toBeLessThan(order.indexOf("a3"));
    expect(running.max).toBeLessThanOrEqual(3);
    expect(running.maxA).toBeLessThanOrEqual(2);
    expect(queue.waiting).toBe(0);
  });
});
