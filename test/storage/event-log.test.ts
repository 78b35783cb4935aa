import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { openStore, type Store, type StoreOptions } from "../../storage/store.js";
import type { EventLog } from "../../storage/events/event-log.js";
import { LocalEventLog } from "../../storage/events/local-event-log.js";
import { RedisEventLog } from "../../storage/events/redis-event-log.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";

const dirs: string[] = [];
const prefixes: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

const OPTIONS = { maxDeliveries: 3, retentionMs: 3600_000 };
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Lets `ms` pass for the log's leases and delays. The in-process logs take a clock, moved on here
 * at once; Redis leases run on the Redis server's own time, so there the test waits for real.
 */
let elapse: (ms: number) => Promise<void> = sleep;

function open(store: Store, options: StoreOptions): EventLog {
  if (store.driver === "redis") {
    elapse = sleep;
    return new RedisEventLog(store.duplicateRedis!(), options.REDIS_PREFIX, OPTIONS);
  }
  let offset = 0;
  elapse = async (ms) => void (offset += ms);
  return new LocalEventLog(store.kv, { ...OPTIONS, persist: store.driver === "fs", now: () => Date.now() + offset });
}

// One contract, every driver: memory and fs in process, Redis Streams on the real server.
describe.each(["memory", "fs", "redis"] as const)("event log on %s", (driver) => {
  let store: Store;
  let options: StoreOptions;
  let log: EventLog;
  const publish = (topic = "orders", type = "order.created", payload: Record<string, unknown> = {}) =>
    log.publish({ tenantId: "ten_a", topic, type, source: "test", payload });

  beforeEach(async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-events-"));
    dirs.push(dir);
    const prefix = uniqueRedisPrefix();
    prefixes.push(prefix);
    options = { STORAGE: driver, DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix };
    store = await openStore(options);
    log = open(store, options);
  });
  afterEach(async () => {
    await log.close();
    await store.close();
  });

  it("publishes, gets and lists newest first with a cursor and filters", async () => {
    const a = await publish("orders", "order.created", { n: 1 });
    const b = await publish("orders", "order.paid", { n: 2 });
    const c = await publish("users", "user.created", { nested: { empty: {} } });
    expect(await log.get(a.id)).toEqual(a);
    expect(await log.get("evt_missing")).toBeNull();
    const page1 = await log.list({ tenantId: "ten_a", limit: 2 });
    expect(page1.events.map((e) => e.id)).toEqual([c.id, b.id]);
    const page2 = await log.list({ tenantId: "ten_a", limit: 2, cursor: page1.nextCursor! });
    expect(page2.events.map((e) => e.id)).toEqual([a.id]);
    expect(page2.nextCursor).toBeNull();
    expect((await log.list({ tenantId: "ten_a", topic: "orders", limit: 10 })).events.map((e) => e.id)).toEqual([b.id, a.id]);
    expect((await log.list({ tenantId: "ten_a", type: "order.paid", limit: 10 })).events).toEqual([b]);
    expect((await log.list({ tenantId: "ten_b", limit: 10 })).events).toEqual([]);
    expect((await log.get(c.id))!.payload).toEqual({ nested: { empty: {} } });
  });

  it("leases each event to one consumer of a group at a time; every group gets every event", async () => {
    const ids = [];
    for (let i = 0; i < 6; i++) ids.push((await publish()).id);
    const first = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g1", max: 4, leaseMs: 60_000 });
    const second = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g1", max: 4, leaseMs: 60_000 });
    expect(first).toHaveLength(4);
    expect(second).toHaveLength(2);
    expect([...first, ...second].map((l) => l.event.id)).toEqual(ids);
    expect(first[0]!.deliveryCount).toBe(1);
    expect(await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g1", max: 4, leaseMs: 60_000 })).toEqual([]);
    const other = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g2", max: 10, leaseMs: 60_000 });
    expect(other.map((l) => l.event.id)).toEqual(ids);
  });

  it("ack finishes an event; a second ack, a stale lease and an unknown id get their own answers", async () => {
    const event = await publish();
    const [lease] = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 });
    expect(await log.ack({ id: event.id, consumer: "g", leaseId: "nope" })).toBe("lease_moved");
    expect(await log.ack({ id: event.id, consumer: "g", leaseId: lease!.leaseId })).toBe("ok");
    expect(await log.ack({ id: event.id, consumer: "g", leaseId: lease!.leaseId })).toBe("acked");
    expect(await log.ack({ id: event.id, consumer: "other" })).toBe("not_leased");
    expect(await log.ack({ id: "evt_missing", consumer: "g" })).toBe("unknown");
    expect(await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 5, leaseMs: 100 })).toEqual([]);
  });

  it("an expired lease goes to the next consumer, and the old lease can no longer ack", async () => {
    const event = await publish();
    const [old] = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 120 });
    expect(await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 120 })).toEqual([]);
    await elapse(200);
    const [next] = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 });
    expect(next!.event.id).toBe(event.id);
    expect(next!.deliveryCount).toBe(2);
    expect(await log.ack({ id: event.id, consumer: "g", leaseId: old!.leaseId })).toBe("lease_moved");
    expect(await log.ack({ id: event.id, consumer: "g", leaseId: next!.leaseId })).toBe("ok");
  });

  it("nack makes an event available again after its delay; a nacked event cannot be acked", async () => {
    const event = await publish();
    const [lease] = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 });
    expect(await log.nack({ id: event.id, consumer: "g", leaseId: lease!.leaseId, delayMs: 150 })).toBe("ok");
    expect(await log.ack({ id: event.id, consumer: "g", leaseId: lease!.leaseId })).toBe("not_leased");
    expect(await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 })).toEqual([]);
    await elapse(220);
    const [again] = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 });
    expect(again).toMatchObject({ deliveryCount: 2, event: { id: event.id } });
  });

  it("dead-letters after the delivery cap, lists the reason, and requeues", async () => {
    const event = await publish();
    for (let i = 1; i <= 3; i++) {
      const [lease] = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 });
      expect(lease!.deliveryCount).toBe(i);
      expect(await log.nack({ id: event.id, consumer: "g", leaseId: lease!.leaseId, delayMs: 0 })).toBe("ok");
    }
    expect(await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 })).toEqual([]);
    const dead = await log.deadLetters({ tenantId: "ten_a", limit: 10 });
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ consumer: "g", deliveries: 3, event: { id: event.id } });
    expect(dead[0]!.reason).toContain("EVENTS_MAX_DELIVERIES");
    expect(await log.ack({ id: event.id, consumer: "g" })).toBe("dead");
    expect(await log.requeue({ id: event.id, consumer: "other" })).toBe("not_dead");
    expect(await log.requeue({ id: event.id, consumer: "g" })).toBe("ok");
    expect(await log.deadLetters({ tenantId: "ten_a", limit: 10 })).toEqual([]);
    const [back] = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 });
    expect(back).toMatchObject({ deliveryCount: 1, event: { id: event.id } });
    expect(await log.ack({ id: event.id, consumer: "g", leaseId: back!.leaseId })).toBe("ok");
  });

  it("an expired lease past the cap is dead-lettered on the next consume", async () => {
    const event = await publish();
    for (let i = 0; i < 3; i++) {
      await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60 });
      await elapse(100);
    }
    expect(await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 })).toEqual([]);
    expect((await log.deadLetters({ tenantId: "ten_a", consumer: "g", limit: 10 }))[0]).toMatchObject({
      deliveries: 3,
      event: { id: event.id },
    });
  });

  // Memory keeps nothing across a restart by design; fs and Redis must.
  const durable = driver === "memory" ? () => undefined : it;
  durable("keeps events, leases and acks across a restart", async () => {
    const a = await publish();
    const b = await publish();
    const [lease] = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 1, leaseMs: 60_000 });
    expect(await log.ack({ id: a.id, consumer: "g", leaseId: lease!.leaseId })).toBe("ok");
    await log.close();
    await store.close();
    store = await openStore(options);
    log = open(store, options);
    expect(await log.get(b.id)).toEqual(b);
    const next = await log.consume({ tenantId: "ten_a", topic: "orders", consumer: "g", max: 5, leaseMs: 60_000 });
    expect(next.map((l) => l.event.id)).toEqual([b.id]);
  });
});
