import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";

/**
 * `POST /events/{id}/ack` and `/nack` with no body (docs/interface.md 6 shows no payload; docs/events.md
 * "Ack and nack without a body"): they settle the one lease held on the event; with leases of
 * several consumer groups the caller names one in `consumer` (400 otherwise); with none, 409.
 * On memory, fs and Redis.
 */

const dirs: string[] = [];
const prefixes: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

describe.each(["memory", "fs", "redis"] as const)("ack and nack without a body on %s", (driver) => {
  let server: TestServer;
  let alice: Awaited<ReturnType<typeof registerUser>>;
  let bob: Awaited<ReturnType<typeof registerUser>>;

  beforeAll(async () => {
    const env: Record<string, string> = { STORAGE: driver, EVENTS_MAX_DELIVERIES: "5" };
    if (driver === "fs") {
      const dir = await mkdtemp(join(tmpdir(), "gw-ack-"));
      dirs.push(dir);
      env.DATA_DIR = dir;
    }
    if (driver === "redis") {
      const prefix = uniqueRedisPrefix();
      prefixes.push(prefix);
      env.REDIS_PREFIX = prefix;
    }
    server = await startTestServer(env);
    [alice, bob] = await Promise.all([registerUser(server), registerUser(server)]);
  });
  afterAll(async () => {
    await server?.close();
  });

  const call = (who: { token: string }, method: string, path: string, json?: unknown) =>
    server.request(`/gateway/v1${path}`, { method, headers: bearer(who.token), ...(json !== undefined ? { json } : {}) });
  const publish = async (topic: string) =>
    (await call(alice, "POST", "/events", { topic, type: "job.queued", payload: {} })).body as { id: string };
  const consume = (topic: string, consumer: string) => call(alice, "POST", `/events/consume?topic=${topic}&consumer=${consumer}`);

  it("acks the one lease held on the event; a second ack finds none (409)", async () => {
    const event = await publish("solo");
    expect((await consume("solo", "workers")).body.data.map((e: { id: string }) => e.id)).toEqual([event.id]);
    const acked = await call(alice, "POST", `/events/${event.id}/ack`);
    expect(acked.status).toBe(200);
    expect(acked.body).toEqual({ id: event.id, consumer: "workers", status: "acked" });
    const again = await call(alice, "POST", `/events/${event.id}/ack`);
    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain("No consumer group holds a lease");
    expect((await consume("solo", "workers")).body.data).toEqual([]);
  });

  it("asks for `consumer` when several groups hold leases, then settles the one left without it", async () => {
    const event = await publish("shared");
    await consume("shared", "alpha");
    await consume("shared", "beta");
    const ambiguous = await call(alice, "POST", `/events/${event.id}/ack`);
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.error.message).toContain("alpha, beta");
    expect(ambiguous.body.error.details).toEqual({ eventId: event.id, consumers: ["alpha", "beta"] });
    expect((await call(alice, "POST", `/events/${event.id}/ack`, { consumer: "alpha" })).body).toMatchObject({
      consumer: "alpha",
      status: "acked",
    });
    const nacked = await call(alice, "POST", `/events/${event.id}/nack`);
    expect(nacked.status).toBe(200);
    expect(nacked.body).toEqual({ id: event.id, consumer: "beta", status: "nacked" });
    // Nacked and waiting: no lease to settle until it is consumed again.
    expect((await call(alice, "POST", `/events/${event.id}/nack`)).status).toBe(409);
    expect((await consume("shared", "beta")).body.data[0]).toMatchObject({ id: event.id, deliveryCount: 2 });
    expect((await call(alice, "POST", `/events/${event.id}/ack`)).body).toMatchObject({ consumer: "beta", status: "acked" });
  });

  it("gives another tenant's event the same 404 as a missing one, and leaves its lease alone", async () => {
    const event = await publish("private");
    await consume("private", "workers");
    for (const action of ["ack", "nack"]) {
      const theirs = await call(bob, "POST", `/events/${event.id}/${action}`);
      const missing = await call(bob, "POST", `/events/evt_doesnotexist/${action}`);
      expect(theirs.status).toBe(404);
      expect(missing.status).toBe(404);
      expect(theirs.body.error.message.replace(event.id, "X")).toBe(missing.body.error.message.replace("evt_doesnotexist", "X"));
    }
    expect((await call(alice, "POST", `/events/${event.id}/ack`)).body).toMatchObject({ consumer: "workers", status: "acked" });
  });
});
