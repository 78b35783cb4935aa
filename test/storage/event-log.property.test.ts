import fc from "fast-check";
import { createStorage } from "unstorage";
import memoryDriver from "unstorage/drivers/memory";
import { describe, expect, it } from "vitest";
import { LocalEventLog } from "../../storage/events/local-event-log.js";

const MAX = 3;
const LEASE = 100;

type Command =
  | { kind: "publish" }
  | { kind: "consume"; consumer: number; max: number }
  | { kind: "ack"; pick: number }
  | { kind: "nack"; pick: number; delay: number }
  | { kind: "expire"; ms: number }
  | { kind: "stale-ack"; pick: number };

const command: fc.Arbitrary<Command> = fc.oneof(
  fc.constant({ kind: "publish" as const }),
  fc.record({ kind: fc.constant("consume" as const), consumer: fc.nat(2), max: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ kind: fc.constant("ack" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("nack" as const), pick: fc.nat(), delay: fc.constantFrom(0, 50, 150) }),
  fc.record({ kind: fc.constant("expire" as const), ms: fc.constantFrom(30, 120) }),
  fc.record({ kind: fc.constant("stale-ack" as const), pick: fc.nat() }),
);

/**
 * Model-based property of the bus (CONVENTIONS "Property tests"): random publish, consume,
 * ack, nack and lease expiry against a reference model of one consumer group. Checked after
 * every step: no event is held by two consumers at once, nothing acknowledged is delivered
 * again, stale leases never settle; and at the end, draining the group leaves every event
 * acked or dead-lettered.
 */
describe("event bus model", () => {
  it("every event ends acked or dead, never held twice, never redelivered after ack", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { maxLength: 60 }), async (commands) => {
        let clock = 1_000_000;
        const log = new LocalEventLog(createStorage({ driver: memoryDriver() }), {
          maxDeliveries: MAX,
          retentionMs: 1e12,
          now: () => clock,
          persist: false,
        });
        const published: string[] = [];
        const acked = new Set<string>();
        /** event id → the current lease (model). */
        const held = new Map<string, { leaseId: string; until: number }>();
        const stale: { id: string; leaseId: string }[] = [];
        const consume = async (consumer: number, max: number) => {
          const leases = await log.consume({ tenantId: "t", topic: "x", consumer: "g", max, leaseMs: LEASE });
          for (const lease of leases) {
            const id = lease.event.id;
            expect(acked.has(id), "acknowledged event redelivered").toBe(false);
            const current = held.get(id);
            expect(current && current.until > clock, `event held twice (consumer ${consumer})`).toBeFalsy();
            if (current) stale.push({ id, leaseId: current.leaseId });
            expect(lease.deliveryCount).toBeLessThanOrEqual(MAX);
            held.set(id, { leaseId: lease.leaseId, until: lease.leaseExpiresAt });
          }
          return leases;
        };
        for (const cmd of commands) {
          if (cmd.kind === "publish")
            published.push((await log.publish({ tenantId: "t", topic: "x", type: "x.y", source: "p", payload: {} })).id);
          else if (cmd.kind === "consume") await consume(cmd.consumer, cmd.max);
          else if (cmd.kind === "expire") clock += cmd.ms;
          else if (cmd.kind === "stale-ack") {
            const entry = stale[cmd.pick % Math.max(1, stale.length)];
            if (entry) expect(await log.ack({ id: entry.id, consumer: "g", leaseId: entry.leaseId })).not.toBe("ok");
          } else {
            const ids = [...held.keys()];
            if (ids.length === 0) continue;
            const id = ids[cmd.pick % ids.length]!;
            const { leaseId } = held.get(id)!;
            const result =
              cmd.kind === "ack"
                ? await log.ack({ id, consumer: "g", leaseId })
                : await log.nack({ id, consumer: "g", leaseId, delayMs: cmd.delay });
            expect(result).toBe("ok");
            held.delete(id);
            if (cmd.kind === "ack") acked.add(id);
          }
        }
        // Drain: a consumer that acks nothing until the cap leaves every event acked or dead.
        for (let round = 0; round < MAX + 2; round++) {
          clock += LEASE * 2;
          held.clear();
          await consume(0, 1000);
        }
        const dead = new Set((await log.deadLetters({ tenantId: "t", limit: 10_000 })).map((letter) => letter.event.id));
        for (const id of published) expect(acked.has(id) !== dead.has(id), `event ${id} neither acked nor dead, or both`).toBe(true);
      }),
      { numRuns: 150 },
    );
  });
});
