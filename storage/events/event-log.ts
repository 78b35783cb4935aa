/**
 * The event bus as storage sees it (docs/events.md): an append-only log per tenant and topic,
 * read by consumer groups at least once, with leases, nack, a delivery cap and dead letters.
 * Two implementations keep one contract: LocalEventLog (memory, fs) and RedisEventLog (Redis
 * Streams); test/storage/event-log.test.ts runs the same suite on all three drivers.
 */
export interface EventRecord {
  id: string;
  tenantId: string;
  topic: string;
  type: string;
  source: string;
  payload: Record<string, unknown>;
  createdAt: string;
}

export type PublishInput = Omit<EventRecord, "id" | "createdAt">;

export interface LeasedEvent {
  event: EventRecord;
  /** Names this delivery; ack and nack with a lease that is no longer current get `lease_moved`. */
  leaseId: string;
  /** 1 on the first delivery to the group, +1 on every redelivery. */
  deliveryCount: number;
  /** Epoch ms after which the event may go to another consumer of the group. */
  leaseExpiresAt: number;
}

export interface DeadLetter {
  event: EventRecord;
  consumer: string;
  deliveries: number;
  reason: string;
  deadAt: string;
}

/**
 * The answer to ack, nack and requeue: `ok`, or why not — `unknown` (no such event),
 * `acked` (already acknowledged by the group), `dead` (dead-lettered), `not_leased` (the
 * group holds no lease on it: never delivered, or nacked and waiting), `lease_moved` (the
 * given lease is not the current one), `not_dead` (requeue of an event that is not dead).
 */
export type SettleResult = "ok" | "unknown" | "acked" | "dead" | "not_leased" | "lease_moved" | "not_dead";

export interface ListQuery {
  tenantId: string;
  topic?: string;
  type?: string;
  /** Only events created at or after this epoch ms. */
  since?: number;
  limit: number;
  /** From a previous page's `nextCursor`. */
  cursor?: string;
}

export interface ConsumeQuery {
  tenantId: string;
  topic: string;
  consumer: string;
  max: number;
  leaseMs: number;
}

export interface SettleQuery {
  id: string;
  consumer: string;
  leaseId?: string;
}

export interface EventLogOptions {
  /** Deliveries to one group after which an event is dead-lettered (EVENTS_MAX_DELIVERIES). */
  maxDeliveries: number;
  /** How long events are kept (EVENTS_RETENTION seconds, in ms). */
  retentionMs: number;
  /** The clock (tests). Redis uses its own server time for leases. */
  now?: () => number;
}

/**
 * Longest lease or nack delay (12 h, SQS's visibility limit). On Redis it is also the
 * XAUTOCLAIM idle threshold: a lease ending at T is stored as a delivery at T - MAX_LEASE_MS.
 */
export const MAX_LEASE_MS = 12 * 3600_000;

export interface EventLog {
  publish(input: PublishInput): Promise<EventRecord>;
  get(id: string): Promise<EventRecord | null>;
  /** Newest first. */
  list(query: ListQuery): Promise<{ events: EventRecord[]; nextCursor: string | null }>;
  consume(query: ConsumeQuery): Promise<LeasedEvent[]>;
  ack(query: SettleQuery): Promise<SettleResult>;
  /** Makes the event available to the group again after `delayMs`; past the cap it is dead-lettered. */
  nack(query: SettleQuery & { delayMs: number }): Promise<SettleResult>;
  /**
   * The consumer groups that hold a lease on the event now (what ack and nack would settle
   * without `leaseId`), in name order; empty for an unknown event.
   */
  leaseHolders(id: string): Promise<string[]>;
  deadLetters(query: { tenantId: string; consumer?: string; topic?: string; limit: number }): Promise<DeadLetter[]>;
  /** Puts a dead letter back in its group's queue with a fresh delivery count. */
  requeue(query: { id: string; consumer: string }): Promise<SettleResult>;
  close(): Promise<void>;
}
