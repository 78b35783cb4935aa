import type { WebhooksDeps } from "../../../rpc/webhooks/deps.js";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { startReceiver } from "../../helpers/webhook-receiver.js";
import { eventually } from "../../helpers/eventually.js";
import { RETRY_SCHEDULE_MS } from "../../../rpc/webhooks/worker.js";
import type { ResolveHost } from "../../../rpc/outbound/outbound-guard.js";

/** Set to make public.example.com answer with loopback, as a rebinding DNS server would after the check. */
let rebound = false;
// A public-looking name that resolves to the loopback receiver; nothing leaves the machine.
const resolveHost: ResolveHost = async (host) => {
  if (host === "hooks.example.com") return [{ address: "127.0.0.1", family: 4 }];
  if (host === "public.example.com") return [{ address: rebound ? "127.0.0.1" : "93.184.215.14", family: 4 }];
  throw Object.assign(new Error(`${host} not found`), { code: "ENOTFOUND" });
};

let server: TestServer;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let alice: Awaited<ReturnType<typeof registerUser>>;
let bob: Awaited<ReturnType<typeof registerUser>>;

beforeAll(async () => {
  server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: "true", WEBHOOKS_POLL_MS: "0", WEBHOOKS_TIMEOUT_SECONDS: "1" }, { resolveHost });
  receiver = await startReceiver();
  alice = await registerUser(server);
  bob = await registerUser(server);
});
afterAll(async () => {
  await receiver.close();
  await server.close();
});
afterEach(() => {
  vi.useRealTimers();
  receiver.answers.length = 0;
});

const call = (who: { token: string }, method: string, path: string, json?: unknown) =>
  server.request(`/gateway/v1${path}`, { method, headers: bearer(who.token), ...(json !== undefined ? { json } : {}) });

async function subscribe(who: { token: string }, filter: string[], path = "/hook") {
  const res = await call(who, "POST", "/webhooks/subscriptions", {
    url: `http://hooks.example.com:${receiver.port}${path}`,
    filter,
    description: "test",
  });
  expect(res.status).toBe(201);
  receiver.secrets.push(res.body.secret);
  return res.body as { id: string; secret: string };
}

const deliveriesOf = async (subscriptionId: string) =>
  (await call(alice, "GET", `/webhooks/deliveries?subscriptionId=${subscriptionId}`)).body.data;

describe("webhooks", () => {
  it("creates a subscription whose whsec_ secret is shown once and never listed", async () => {
    const sub = await subscribe(alice, ["audit.*"]);
    expect(sub.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32,}$/);
    const list = await call(alice, "GET", "/webhooks/subscriptions");
    expect(JSON.stringify(list.body)).not.toContain(sub.secret.slice(6));
    expect(JSON.stringify((await call(alice, "GET", `/webhooks/subscriptions/${sub.id}`)).body)).not.toContain("whsec_");
    expect(server.rawLogs.join("\n")).not.toContain(sub.secret.slice(6));
    expect(list.body.data.map((s: { id: string }) => s.id)).toContain(sub.id);
  });

  it("delivers a matching event signed per Standard Webhooks, and not an unmatched one", async () => {
    const sub = await subscribe(alice, ["order.*"]);
    const before = receiver.received.length;
    const event = (await call(alice, "POST", "/events", { topic: "order", type: "order.created", payload: { n: 1 } })).body;
    await call(alice, "POST", "/events", { topic: "misc", type: "misc.thing", payload: {} });
    await eventually(async () => (await deliveriesOf(sub.id))[0]?.status === "succeeded");
    const got = receiver.received.slice(before).filter((r) => r.body.includes(event.id));
    expect(got).toHaveLength(1);
    expect(got[0]!.error).toBeUndefined();
    expect(got[0]!.verified).toMatchObject({ type: "order.created", data: { id: event.id, payload: { n: 1 } } });
    expect(got[0]!.headers["webhook-id"]).toMatch(/^msg_/);
    expect(receiver.received.slice(before).some((r) => r.body.includes("misc.thing"))).toBe(false);
    const [delivery] = await deliveriesOf(sub.id);
    expect(delivery).toMatchObject({
      status: "succeeded",
      attemptCount: 1,
      lastStatusCode: 200,
      attempts: [{ statusCode: 200, response: expect.stringContaining("answer") }],
    });
  });

  it("retries on Svix's schedule with jitter under a driven clock, then fails and publishes webhook.delivery.failed", async () => {
    const sub = await subscribe(alice, ["retry.*"]);
    const watcher = await subscribe(alice, ["webhook.delivery.failed"], "/watch");
    receiver.answers.push(500, 503, "redirect", 404, 500, 500, 500, 500);
    await call(alice, "POST", "/events", { topic: "retry", type: "retry.me", payload: {} });
    const worker = server.composition.deps<WebhooksDeps>("webhooks").webhookWorker;
    await eventually(async () => (await deliveriesOf(sub.id))[0]?.attemptCount === 1);
    const id = (await deliveriesOf(sub.id))[0].id as string;
    // Only Date is faked: sockets and timers stay real, the worker reads the clock we move.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now());
    let record = (await server.composition.ports.repos.webhooks.getDelivery(id))!;
    for (let i = 0; i < RETRY_SCHEDULE_MS.length; i++) {
      const wait = Date.parse(record.nextAttemptAt!) - Date.now();
      // The first attempt ran on the real clock a moment before it was frozen: its wait counts
      // from the attempt (stamped when sent, a little after its tick began, whose time the
      // schedule counts from); the others ran on the driven clock, at its "now".
      const scheduled = i === 0 ? Date.parse(record.nextAttemptAt!) - Date.parse(record.attempts[0]!.at) : wait;
      expect(scheduled).toBeGreaterThanOrEqual(RETRY_SCHEDULE_MS[i]! * 0.9 - (i === 0 ? 250 : 50));
      expect(scheduled).toBeLessThanOrEqual(RETRY_SCHEDULE_MS[i]! * 1.1 + 50);
      // Not due yet: nothing happens.
      vi.setSystemTime(Date.now() + wait - 1000);
      expect(await worker.tick()).toBe(0);
      vi.setSystemTime(Date.now() + 1000);
      expect(await worker.tick()).toBe(1);
      record = (await server.composition.ports.repos.webhooks.getDelivery(id))!;
    }
    // The failure event is fanned out in the background, its delivery due at the driven clock's
    // "now": let it run before the clock goes back (read from storage: sessions have expired
    // on the driven clock).
    const repo = server.composition.ports.repos.webhooks;
    await eventually(async () =>
      (await repo.listDeliveries(alice.user.tenantId)).some((d) => d.subscriptionId === watcher.id && d.status === "succeeded"),
    );
    vi.useRealTimers();
    const [delivery] = await deliveriesOf(sub.id);
    expect(delivery).toMatchObject({ status: "failed", attemptCount: 8, nextAttemptAt: null });
    expect(delivery.attempts.map((a: { statusCode: number }) => a.statusCode)).toEqual([500, 503, 302, 404, 500, 500, 500, 500]);
    expect(delivery.attempts[2].error).toContain("not followed");
    const failed = (await call(alice, "GET", "/events?type=webhook.delivery.failed")).body.data;
    expect(failed[0].payload).toMatchObject({ deliveryId: delivery.id, attempts: 8, lastStatusCode: 500 });
    await eventually(async () => (await deliveriesOf(watcher.id))[0]?.status === "succeeded");
    // A manual retry attempts once more, now.
    const retried = await call(alice, "POST", `/webhooks/deliveries/${delivery.id}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: "succeeded", attemptCount: 9 });
  });

  it("times out a hanging receiver and keeps only a bounded snippet of a huge answer", async () => {
    const sub = await subscribe(alice, ["slow.*"]);
    receiver.answers.push("hang");
    await call(alice, "POST", "/events", { topic: "slow", type: "slow.one", payload: {} });
    await eventually(async () => (await deliveriesOf(sub.id))[0]?.attemptCount === 1, 5000);
    const [hung] = await deliveriesOf(sub.id);
    expect(hung.status).toBe("pending");
    expect(hung.attempts[0]).toMatchObject({ statusCode: null, error: expect.stringContaining("WEBHOOKS_TIMEOUT_SECONDS") });
    receiver.answers.push("huge");
    const retried = await call(alice, "POST", `/webhooks/deliveries/${hung.id}/retry`);
    expect(retried.body.status).toBe("succeeded");
    expect(retried.body.attempts[1].response.length).toBeLessThanOrEqual(1024);
  });

  it("dispatches a ping or a stored event now; disable, rotate and delete", async () => {
    const sub = await subscribe(alice, ["nothing.matches"]);
    const ping = await call(alice, "POST", "/webhooks/dispatch", { subscriptionId: sub.id });
    expect(ping.status).toBe(200);
    expect(ping.body.deliveries).toHaveLength(1);
    await eventually(async () =>
      (await deliveriesOf(sub.id)).some(
        (d: { eventType: string; status: string }) => d.eventType === "webhook.ping" && d.status === "succeeded",
      ),
    );

    const rotated = await call(alice, "POST", `/webhooks/subscriptions/${sub.id}/rotate-secret`);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(sub.secret);
    // Only the new secret: the receiver still verifies (two signatures during the grace period).
    receiver.secrets.length = 0;
    receiver.secrets.push(rotated.body.secret);
    const before = receiver.received.length;
    await call(alice, "POST", "/webhooks/dispatch", { subscriptionId: sub.id });
    await eventually(() => receiver.received.length > before);
    const last = receiver.received.at(-1)!;
    expect(last.error).toBeUndefined();
    expect(String(last.headers["webhook-signature"]).split(" ")).toHaveLength(2);

    expect((await call(alice, "PATCH", `/webhooks/subscriptions/${sub.id}`, { enabled: false, filter: ["*"] })).body.enabled).toBe(false);
    const count = (await deliveriesOf(sub.id)).length;
    // An enabled subscription to the same event shows when its fan-out has run (its delivery stored, the job gone).
    const witness = await subscribe(alice, ["any.*"]);
    const event = (await call(alice, "POST", "/events", { topic: "any", type: "any.thing", payload: {} })).body;
    const repo = server.composition.ports.repos.webhooks;
    await eventually(
      async () =>
        (await deliveriesOf(witness.id)).some((d: { eventId: string }) => d.eventId === event.id) &&
        !(await repo.fanOutsDue(Number.MAX_SAFE_INTEGER, 1000)).some((job) => job.eventId === event.id),
    );
    expect((await deliveriesOf(sub.id)).length).toBe(count);
    expect((await call(alice, "DELETE", `/webhooks/subscriptions/${witness.id}`)).status).toBe(200);
    expect((await call(alice, "DELETE", `/webhooks/subscriptions/${sub.id}`)).status).toBe(200);
    expect((await call(alice, "GET", `/webhooks/subscriptions/${sub.id}`)).status).toBe(404);
  });

  it("refuses URLs that are not http(s), unresolvable, or carry credentials", async () => {
    for (const url of ["ftp://hooks.example.com/x", "not a url", "http://nowhere.invalid/x", "http://user:pw@hooks.example.com/x"]) {
      const res = await call(alice, "POST", "/webhooks/subscriptions", { url });
      expect(res.status, url).toBe(400);
    }
  });

  it("another tenant's subscription and delivery answer like missing ones and stay untouched", async () => {
    const sub = await subscribe(alice, ["iso.*"]);
    await call(alice, "POST", "/events", { topic: "iso", type: "iso.one", payload: {} });
    const delivery = await eventually(async () => (await deliveriesOf(sub.id))[0]);
    const pairs: [string, string, string, unknown?][] = [
      ["GET", `/webhooks/subscriptions/${sub.id}`, "/webhooks/subscriptions/whs_missing"],
      ["PATCH", `/webhooks/subscriptions/${sub.id}`, "/webhooks/subscriptions/whs_missing", { enabled: false }],
      ["POST", `/webhooks/subscriptions/${sub.id}/rotate-secret`, "/webhooks/subscriptions/whs_missing/rotate-secret"],
      ["DELETE", `/webhooks/subscriptions/${sub.id}`, "/webhooks/subscriptions/whs_missing"],
      ["POST", `/webhooks/deliveries/${delivery.id}/retry`, "/webhooks/deliveries/msg_missing/retry"],
      ["GET", `/webhooks/deliveries?subscriptionId=${sub.id}`, "/webhooks/deliveries?subscriptionId=whs_missing"],
      ["POST", "/webhooks/dispatch", "/webhooks/dispatch", { subscriptionId: sub.id }],
      ["GET", `/webhooks/subscriptions?tenantId=${alice.user.tenantId}`, "/webhooks/subscriptions?tenantId=ten_missing"],
    ];
    for (const [method, theirs, missing, body] of pairs) {
      const a = await call(bob, method, theirs, body);
      const b = await call(
        bob,
        method,
        missing,
        body ?? (method === "POST" && missing.endsWith("dispatch") ? { subscriptionId: "whs_missing" } : undefined),
      );
      expect(a.status, `${method} ${theirs}`).toBe(404);
      expect(b.status, `${method} ${missing}`).toBe(404);
    }
    const still = (await call(alice, "GET", `/webhooks/subscriptions/${sub.id}`)).body;
    expect(still).toMatchObject({ id: sub.id, enabled: true });
    expect(await deliveriesOf(sub.id)).toHaveLength(1);
    expect((await call(bob, "GET", "/webhooks/deliveries")).body.data).toEqual([]);
  });
});

describe("webhooks with the address rule on (the default)", () => {
  it("refuses private and loopback URLs at creation, and refuses the resolved address at delivery", async () => {
    const strict = await startTestServer({ WEBHOOKS_POLL_MS: "0" }, { resolveHost });
    try {
      const user = await registerUser(strict);
      const post = (url: string) =>
        strict.request("/gateway/v1/webhooks/subscriptions", { method: "POST", headers: bearer(user.token), json: { url } });
      for (const url of [
        "http://127.0.0.1:9/x",
        "http://10.0.0.1/x",
        "http://[::1]/x",
        "http://169.254.169.254/latest",
        `http://hooks.example.com:${receiver.port}/x`,
      ]) {
        const res = await post(url);
        expect(res.status, url).toBe(400);
        expect(res.body.error.message).toContain("this deployment does not deliver webhooks to private addresses");
        expect(res.body.error.message).not.toContain("ALLOW_PRIVATE");
      }
      const sub = await post(`http://public.example.com:${receiver.port}/hook`);
      expect(sub.status).toBe(201);
      // The name now resolves inside: the delivery is refused at connection time, nothing is sent.
      rebound = true;
      const before = receiver.received.length;
      const dispatched = await strict.request("/gateway/v1/webhooks/dispatch", {
        method: "POST",
        headers: bearer(user.token),
        json: { subscriptionId: sub.body.id },
      });
      const id = dispatched.body.deliveries[0].id;
      const delivery = await eventually(async () => {
        const record = await strict.composition.ports.repos.webhooks.getDelivery(id);
        return record && record.attempts.length === 1 ? record : undefined;
      });
      expect(delivery!.attempts[0]).toMatchObject({ statusCode: null, error: expect.stringContaining("Refused") });
      expect(receiver.received.length).toBe(before);
    } finally {
      rebound = false;
      await strict.close();
    }
  });
});
