import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

let server: TestServer;
let alice: Awaited<ReturnType<typeof registerUser>>;
let bob: Awaited<ReturnType<typeof registerUser>>;

beforeAll(async () => {
  server = await startTestServer({ EVENTS_MAX_DELIVERIES: "2", EVENTS_MAX_PAYLOAD_BYTES: "1024" });
  alice = await registerUser(server);
  bob = await registerUser(server);
});
afterAll(async () => {
  await server.close();
});

const call = (who: { token: string }, method: string, path: string, json?: unknown) =>
  server.request(`/gateway/v1${path}`, { method, headers: bearer(who.token), ...(json !== undefined ? { json } : {}) });

describe("events on the Gateway API", () => {
  it("publishes with validation, lists newest first with a cursor", async () => {
    const created = await call(alice, "POST", "/events", { topic: "orders", type: "order.created", source: "shop", payload: { n: 1 } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^evt_/),
      tenantId: alice.user.tenantId,
      topic: "orders",
      type: "order.created",
      payload: { n: 1 },
    });
    await call(alice, "POST", "/events", { topic: "orders", type: "order.paid", payload: {} });
    const list = await call(alice, "GET", "/events?topic=orders&limit=1");
    expect(list.status).toBe(200);
    expect(list.body.data[0].type).toBe("order.paid");
    const next = await call(alice, "GET", `/events?topic=orders&limit=1&cursor=${encodeURIComponent(list.body.nextCursor)}`);
    expect(next.body.data[0].id).toBe(created.body.id);
    expect((await call(alice, "GET", "/events?type=order.created")).body.data).toHaveLength(1);

    expect((await call(alice, "POST", "/events", { topic: "Orders", type: "order.created" })).status).toBe(400);
    expect((await call(alice, "POST", "/events", { topic: "orders", type: "order..created" })).status).toBe(400);
    expect((await call(alice, "POST", "/events", { topic: "orders", type: "x".repeat(101) })).status).toBe(400);
    expect((await call(alice, "POST", "/events", { topic: "orders", type: "a.b", payload: [1] })).status).toBe(400);
    const big = await call(alice, "POST", "/events", { topic: "orders", type: "a.b", payload: { blob: "x".repeat(2000) } });
    expect(big.status).toBe(413);
    expect((await call(alice, "POST", "/events", { tenantId: "ten_missing", topic: "orders", type: "a.b" })).status).toBe(404);
    // Consumer group names become storage keys: no path-like names.
    for (const consumer of ["..", ".hidden", "a/b", "x".repeat(65)])
      expect((await call(alice, "POST", `/events/consume?topic=orders&consumer=${encodeURIComponent(consumer)}`)).status).toBe(400);
  });

  it("consumes with leases; ack, a second ack, an unknown id; nack to dead letters and requeue", async () => {
    const event = (await call(alice, "POST", "/events", { topic: "jobs", type: "job.queued", payload: { job: 1 } })).body;
    const first = await call(alice, "POST", "/events/consume?topic=jobs&consumer=workers&max=5&leaseSeconds=60");
    expect(first.status).toBe(200);
    expect(first.body.data).toHaveLength(1);
    expect(first.body.data[0]).toMatchObject({
      id: event.id,
      deliveryCount: 1,
      leaseId: expect.any(String),
      leaseExpiresAt: expect.any(String),
    });
    // Another consumer of the same group gets nothing; another group gets it too.
    expect((await call(alice, "POST", "/events/consume?topic=jobs&consumer=workers")).body.data).toEqual([]);
    const audit = await call(alice, "POST", "/events/consume?topic=jobs&consumer=audit");
    expect(audit.body.data.map((e: { id: string }) => e.id)).toEqual([event.id]);
    const leaseId = first.body.data[0].leaseId;
    expect((await call(alice, "POST", `/events/${event.id}/ack`, { consumer: "workers", leaseId: "stale" })).body.error).toBeDefined();
    expect((await call(alice, "POST", `/events/${event.id}/ack`, { consumer: "workers", leaseId: "stale" })).status).toBe(409);
    expect((await call(alice, "POST", `/events/${event.id}/ack`, { consumer: "workers", leaseId })).status).toBe(200);
    const again = await call(alice, "POST", `/events/${event.id}/ack`, { consumer: "workers", leaseId });
    expect(again.status).toBe(409);
    expect(JSON.stringify(again.body)).toContain("already acknowledged");
    expect((await call(alice, "POST", "/events/evt_unknown/ack", { consumer: "workers" })).status).toBe(404);

    // audit nacks twice: EVENTS_MAX_DELIVERIES=2 dead-letters it.
    expect((await call(alice, "POST", `/events/${event.id}/nack`, { consumer: "audit", leaseId: audit.body.data[0].leaseId })).status).toBe(
      200,
    );
    const second = await call(alice, "POST", "/events/consume?topic=jobs&consumer=audit");
    expect(second.body.data[0]).toMatchObject({ id: event.id, deliveryCount: 2 });
    expect((await call(alice, "POST", `/events/${event.id}/nack`, { consumer: "audit" })).status).toBe(200);
    const dead = await call(alice, "GET", "/events?status=dead&consumer=audit");
    expect(dead.body.data).toHaveLength(1);
    expect(dead.body.data[0]).toMatchObject({
      id: event.id,
      status: "dead",
      deliveries: 2,
      reason: expect.stringContaining("EVENTS_MAX_DELIVERIES"),
    });
    expect((await call(alice, "POST", `/events/${event.id}/ack`, { consumer: "audit" })).status).toBe(409);
    expect((await call(alice, "POST", `/events/${event.id}/requeue`, { consumer: "audit" })).status).toBe(200);
    expect((await call(alice, "POST", `/events/${event.id}/requeue`, { consumer: "audit" })).status).toBe(409);
    expect((await call(alice, "POST", "/events/consume?topic=jobs&consumer=audit")).body.data[0]).toMatchObject({
      id: event.id,
      deliveryCount: 1,
    });
  });

  it("another tenant's events answer exactly like missing ones and stay untouched", async () => {
    const event = (await call(alice, "POST", "/events", { topic: "secret", type: "secret.made", payload: { k: 1 } })).body;
    const lease = (await call(alice, "POST", "/events/consume?topic=secret&consumer=g")).body.data[0];
    for (const path of [`/events/${event.id}/ack`, `/events/${event.id}/nack`, `/events/${event.id}/requeue`]) {
      const theirs = await call(bob, "POST", path, { consumer: "g" });
      const missing = await call(bob, "POST", path.replace(event.id, "evt_doesnotexist"), { consumer: "g" });
      expect(theirs.status).toBe(404);
      expect(missing.status).toBe(404);
      expect(theirs.body.error.message.replace(event.id, "X")).toBe(missing.body.error.message.replace("evt_doesnotexist", "X"));
    }
    for (const req of [
      call(bob, "GET", `/events?tenantId=${alice.user.tenantId}`),
      call(bob, "POST", "/events", { tenantId: alice.user.tenantId, topic: "secret", type: "secret.made" }),
      call(bob, "POST", `/events/consume?topic=secret&consumer=g&tenantId=${alice.user.tenantId}`),
    ])
      expect((await req).status).toBe(404);
    // Bob's own bus is empty, and Alice's lease still acks.
    expect((await call(bob, "POST", "/events/consume?topic=secret&consumer=g")).body.data).toEqual([]);
    expect((await call(alice, "POST", `/events/${event.id}/ack`, { consumer: "g", leaseId: lease.leaseId })).status).toBe(200);
  });
});
