import { randomBytes } from "node:crypto";
import type { Storage } from "unstorage";
import { newId } from "../ids.js";
import type {
  ConsumeQuery,
  DeadLetter,
  EventLog,
  EventLogOptions,
  EventRecord,
  LeasedEvent,
  ListQuery,
  PublishInput,
  SettleQuery,
  SettleResult,
} from "./event-log.js";

interface Stored {
  seq: number;
  event: EventRecord;
}

interface Pending {
  seq: number;
  count: number;
  /** "" while not leased (new after a requeue, or nacked and waiting). */
  leaseId: string;
  /** Lease expiry, or when a nacked event is due again (epoch ms). */
  until: number;
}

interface GroupState {
  tenantId: string;
  topic: string;
  consumer: string;
  /** Highest seq handed to the group. */
  cursor: number;
  pending: Record<string, Pending>;
  dead: Record<string, { seq: number; deliveries: number; reason: string; deadAt: string }>;
}

const streamKey = (tenantId: string, topic: string) => `${tenantId}|${topic}`;
const groupKey = (tenantId: string, topic: string, consumer: string) => `${tenantId}|${topic}|${consumer}`;
// Key segments for the kv: tenant ids, topics and consumer names are all [\w.-] (validated above).
const eventPath = (tenantId: string, id: string) => `events:log:${tenantId}:${id}`;
const groupPath = (g: GroupState) => `events:groups:${g.tenantId}:${g.topic}:${g.consumer}`;

/**
 * The bus for the memory and fs drivers, in one process: everything is served from memory
 * and written through to the kv (fs: one file per event and per consumer group), loaded back
 * on the first call after a restart. Each operation runs its memory part synchronously, so
 * two calls in this process can never hold the same event at once.
 */
export class LocalEventLog implements EventLog {
  readonly #kv: Storage;
  readonly #options: Required<EventLogOptions>;
  readonly #persist: boolean;
  readonly #byId = new Map<string, Stored>();
  readonly #streams = new Map<string, Stored[]>();
  readonly #tenants = new Map<string, Stored[]>();
  readonly #groups = new Map<string, GroupState>();
  readonly #writes = new Map<string, Promise<unknown>>();
  #seq = 0;
  #loaded: Promise<void> | undefined;

  constructor(kv: Storage, options: EventLogOptions & { persist: boolean }) {
    this.#kv = kv;
    this.#persist = options.persist;
    this.#options = { now: Date.now, ...options };
  }

  async publish(input: PublishInput): Promise<EventRecord> {
    await this.#load();
    const now = this.#options.now();
    const event: EventRecord = { id: newId("evt"), ...input, createdAt: new Date(now).toISOString() };
    const stored = { seq: ++this.#seq, event };
    this.#index(stored);
    this.#trim(now);
    await this.#write(eventPath(event.tenantId, event.id), stored);
    return event;
  }

  async get(id: string) {
    await this.#load();
    return this.#byId.get(id)?.event ?? null;
  }

  async list(query: ListQuery) {
    await this.#load();
    const all = query.topic ? (this.#streams.get(streamKey(query.tenantId, query.topic)) ?? []) : (this.#tenants.get(query.tenantId) ?? []);
    const before = query.cursor ? Number(query.cursor) : Number.POSITIVE_INFINITY;
    const events: EventRecord[] = [];
    let nextCursor: string | null = null;
    let lastSeq = 0;
    for (let i = all.length - 1; i >= 0; i--) {
      const { seq, event } = all[i]!;
      if (seq >= before) continue;
      if (query.since !== undefined && Date.parse(event.createdAt) < query.since) break;
      if (query.type && event.type !== query.type) continue;
      if (events.length === query.limit) {
        nextCursor = String(lastSeq);
        break;
      }
      events.push(event);
      lastSeq = seq;
    }
    return { events, nextCursor };
  }

  async consume(query: ConsumeQuery): Promise<LeasedEvent[]> {
    await this.#load();
    const now = this.#options.now();
    const group = this.#group(query.tenantId, query.topic, query.consumer);
    const out: LeasedEvent[] = [];
    const lease = (id: string, entry: Pending) => {
      entry.count += 1;
      entry.leaseId = randomBytes(9).toString("base64url");
      entry.until = now + query.leaseMs;
      out.push({ event: this.#byId.get(id)!.event, leaseId: entry.leaseId, deliveryCount: entry.count, leaseExpiresAt: entry.until });
    };
    // Expired leases and nacked events that are due, oldest first (XAUTOCLAIM on Redis).
    const due = Object.entries(group.pending)
      .filter(([, entry]) => entry.until <= now)
      .sort((a, b) => a[1].seq - b[1].seq);
    for (const [id, entry] of due) {
      if (out.length >= query.max) break;
      if (!this.#byId.has(id)) {
        delete group.pending[id]; // trimmed by retention
        continue;
      }
      if (entry.count >= this.#options.maxDeliveries) {
        this.#kill(group, id, entry, `lease expired or nacked after ${entry.count} deliveries (EVENTS_MAX_DELIVERIES)`, now);
        continue;
      }
      lease(id, entry);
    }
    // Then events the group has never seen (XREADGROUP >).
    const stream = this.#streams.get(streamKey(query.tenantId, query.topic)) ?? [];
    let start = stream.findIndex((stored) => stored.seq > group.cursor);
    while (start !== -1 && start < stream.length && out.length < query.max) {
      const { seq, event } = stream[start++]!;
      group.cursor = seq;
      const entry: Pending = { seq, count: 0, leaseId: "", until: 0 };
      group.pending[event.id] = entry;
      lease(event.id, entry);
    }
    if (out.length > 0 || due.length > 0) await this.#saveGroup(group);
    return out;
  }

  async leaseHolders(id: string): Promise<string[]> {
    await this.#load();
    const stored = this.#byId.get(id);
    if (!stored) return [];
    const holders: string[] = [];
    for (const group of this.#groups.values()) {
      if (group.tenantId === stored.event.tenantId && group.topic === stored.event.topic && group.pending[id]?.leaseId)
        holders.push(group.consumer);
    }
    return holders.sort();
  }

  async ack(query: SettleQuery): Promise<SettleResult> {
    return this.#settle(query, (group, id) => {
      delete group.pending[id];
    });
  }

  async nack(query: SettleQuery & { delayMs: number }): Promise<SettleResult> {
    const now = this.#options.now();
    return this.#settle(query, (group, id, entry) => {
      if (entry.count >= this.#options.maxDeliveries) {
        this.#kill(group, id, entry, `nacked after ${entry.count} deliveries (EVENTS_MAX_DELIVERIES)`, now);
        return;
      }
      entry.leaseId = "";
      entry.until = now + query.delayMs;
    });
  }

  async deadLetters(query: { tenantId: string; consumer?: string; topic?: string; limit: number }): Promise<DeadLetter[]> {
    await this.#load();
    const out: (DeadLetter & { seq: number })[] = [];
    for (const group of this.#groups.values()) {
      if (group.tenantId !== query.tenantId) continue;
      if (query.consumer && group.consumer !== query.consumer) continue;
      if (query.topic && group.topic !== query.topic) continue;
      for (const [id, dead] of Object.entries(group.dead)) {
        const stored = this.#byId.get(id);
        if (stored)
          out.push({
            seq: dead.seq,
            event: stored.event,
            consumer: group.consumer,
            deliveries: dead.deliveries,
            reason: dead.reason,
            deadAt: dead.deadAt,
          });
      }
    }
    return out
      .sort((a, b) => b.deadAt.localeCompare(a.deadAt) || b.seq - a.seq)
      .slice(0, query.limit)
      .map(({ seq: _seq, ...letter }) => letter);
  }

  async requeue(query: { id: string; consumer: string }): Promise<SettleResult> {
    await this.#load();
    const stored = this.#byId.get(query.id);
    if (!stored) return "unknown";
    const group = this.#groups.get(groupKey(stored.event.tenantId, stored.event.topic, query.consumer));
    const dead = group?.dead[query.id];
    if (!group || !dead) return "not_dead";
    delete group.dead[query.id];
    group.pending[query.id] = { seq: dead.seq, count: 0, leaseId: "", until: 0 };
    await this.#saveGroup(group);
    return "ok";
  }

  async close() {
    await Promise.all(this.#writes.values());
  }

  async #settle(query: SettleQuery, apply: (group: GroupState, id: string, entry: Pending) => void): Promise<SettleResult> {
    await this.#load();
    const stored = this.#byId.get(query.id);
    if (!stored) return "unknown";
    const group = this.#groups.get(groupKey(stored.event.tenantId, stored.event.topic, query.consumer));
    if (!group) return "not_leased";
    const entry = group.pending[query.id];
    if (!entry?.leaseId) {
      if (group.dead[query.id]) return "dead";
      if (!entry && stored.seq <= group.cursor) return "acked";
      return "not_leased";
    }
    if (query.leaseId && query.leaseId !== entry.leaseId) return "lease_moved";
    apply(group, query.id, entry);
    await this.#saveGroup(group);
    return "ok";
  }

  #kill(group: GroupState, id: string, entry: Pending, reason: string, now: number) {
    delete group.pending[id];
    group.dead[id] = { seq: entry.seq, deliveries: entry.count, reason, deadAt: new Date(now).toISOString() };
  }

  #group(tenantId: string, topic: string, consumer: string): GroupState {
    const key = groupKey(tenantId, topic, consumer);
    let group = this.#groups.get(key);
    if (!group) {
      // A new group starts at the oldest retained event (Redis: XGROUP CREATE … 0).
      group = { tenantId, topic, consumer, cursor: 0, pending: {}, dead: {} };
      this.#groups.set(key, group);
    }
    return group;
  }

  #index(stored: Stored) {
    const { event } = stored;
    this.#byId.set(event.id, stored);
    const push = (map: Map<string, Stored[]>, key: string) => {
      let list = map.get(key);
      if (!list) map.set(key, (list = []));
      list.push(stored);
    };
    push(this.#streams, streamKey(event.tenantId, event.topic));
    push(this.#tenants, event.tenantId);
  }

  /** EVENTS_RETENTION: drops events older than the window (checked on publish). */
  #trim(now: number) {
    const horizon = new Date(now - this.#options.retentionMs).toISOString();
    for (const [key, list] of this.#tenants) {
      let drop = 0;
      while (drop < list.length && list[drop]!.event.createdAt < horizon) drop++;
      if (drop === 0) continue;
      for (const { event } of list.splice(0, drop)) {
        this.#byId.delete(event.id);
        const stream = this.#streams.get(streamKey(event.tenantId, event.topic));
        if (stream?.[0]?.event.id === event.id) stream.shift();
        if (this.#persist) void this.#kv.removeItem(eventPath(event.tenantId, event.id)).catch(() => undefined);
      }
      if (list.length === 0) this.#tenants.delete(key);
    }
  }

  async #saveGroup(group: GroupState) {
    await this.#write(groupPath(group), group);
  }

  /** Write-through, one chain per key so a later state never lands before an earlier one. */
  #write(path: string, value: unknown): Promise<void> {
    if (!this.#persist) return Promise.resolve();
    const snapshot = JSON.stringify(value);
    const previous = this.#writes.get(path) ?? Promise.resolve();
    const next = previous.then(() => this.#kv.setItem(path, snapshot));
    this.#writes.set(path, next);
    void next
      .finally(() => {
        if (this.#writes.get(path) === next) this.#writes.delete(path);
      })
      .catch(() => undefined);
    return next;
  }

  #load(): Promise<void> {
    if (!this.#persist) return Promise.resolve();
    return (this.#loaded ??= (async () => {
      const parse = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value);
      const eventKeys = await this.#kv.getKeys("events:log");
      const events = eventKeys.length
        ? (await this.#kv.getItems(eventKeys)).map((item) => parse(item.value) as Stored).filter(Boolean)
        : [];
      events.sort((a, b) => a.seq - b.seq);
      for (const stored of events) {
        this.#index(stored);
        this.#seq = Math.max(this.#seq, stored.seq);
      }
      const groupKeys = await this.#kv.getKeys("events:groups");
      const groups = groupKeys.length
        ? (await this.#kv.getItems(groupKeys)).map((item) => parse(item.value) as GroupState).filter(Boolean)
        : [];
      for (const group of groups) this.#groups.set(groupKey(group.tenantId, group.topic, group.consumer), group);
    })());
  }
}
