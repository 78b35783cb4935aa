import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { newId } from "../ids.js";
import {
  MAX_LEASE_MS,
  type ConsumeQuery,
  type DeadLetter,
  type EventLog,
  type EventLogOptions,
  type EventRecord,
  type LeasedEvent,
  type ListQuery,
  type PublishInput,
  type SettleQuery,
  type SettleResult,
} from "./event-log.js";

const FIELD = `local function field(f, name) for j = 1, #f, 2 do if f[j] == name then return f[j + 1] end end end
local function now() local t = redis.call('TIME'); return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end
`;

// KEYS: topic stream, tenant stream, index key. ARGV: event id, json, MINID (ms), retention ms, tenant id.
const PUBLISH = `
redis.call('XADD', KEYS[1], 'MINID', '~', ARGV[3], '*', 'i', ARGV[1], 'e', ARGV[2])
local tid = redis.call('XADD', KEYS[2], 'MINID', '~', ARGV[3], '*', 'e', ARGV[2])
redis.call('SET', KEYS[3], ARGV[5] .. ' ' .. tid, 'PX', ARGV[4])
return tid`;

// A lease ending at T is the PEL entry's delivery time set to T - H (XCLAIM TIME), so
// XAUTOCLAIM with min-idle H reclaims exactly the entries whose lease or nack delay is over.
// KEYS: topic stream, redrive stream, lease hash, dead hash.
// ARGV: group, max, lease ms, max deliveries, H, lease id seed, dead field prefix.
const CONSUME =
  FIELD +
  `
local group, max, leaseMs, maxDel, H = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local t = now()
for i = 1, 2 do pcall(redis.call, 'XGROUP', 'CREATE', KEYS[i], group, '0', 'MKSTREAM') end
local out, n = {}, 0
local function take(i, id, f, count)
  n = n + 1
  local leaseId = ARGV[6] .. n
  redis.call('XCLAIM', KEYS[i], group, 'c', 0, id, 'TIME', t + leaseMs - H, 'JUSTID')
  redis.call('HSET', KEYS[3], field(f, 'i'), leaseId .. ' ' .. i .. ' ' .. id .. ' ' .. count)
  table.insert(out, {field(f, 'e'), leaseId, count, t + leaseMs})
end
for i = 1, 2 do
  local cursor, rounds = '0-0', 0
  while #out < max and rounds < 10 do
    rounds = rounds + 1
    local r = redis.call('XAUTOCLAIM', KEYS[i], group, 'c', H, cursor, 'COUNT', max - #out)
    for _, entry in ipairs(r[2]) do
      local id, f = entry[1], entry[2]
      if f then
        local p = redis.call('XPENDING', KEYS[i], group, id, id, 1)
        local count = tonumber(p[1][4])
        if count > maxDel then
          local evid = field(f, 'i')
          redis.call('XACK', KEYS[i], group, id)
          redis.call('HDEL', KEYS[3], evid)
          redis.call('HSET', KEYS[4], ARGV[7] .. evid, (count - 1) .. '\\n' .. t .. '\\nexpired\\n' .. field(f, 'e'))
        else
          take(i, id, f, count)
        end
      end
    end
    cursor = r[1]
    if cursor == '0-0' then break end
  end
end
for i = 2, 1, -1 do
  if #out < max then
    local r = redis.call('XREADGROUP', 'GROUP', group, 'c', 'COUNT', max - #out, 'STREAMS', KEYS[i], '>')
    if r then for _, entry in ipairs(r[1][2]) do take(i, entry[1], entry[2], 1) end end
  end
end
return out`;

// KEYS: topic stream, redrive stream, lease hash, dead hash, acked marker.
// ARGV: group, event id, lease id or '', 'ack'|'nack', delay ms, H, max deliveries, dead field, retention ms.
const SETTLE =
  FIELD +
  `
local v = redis.call('HGET', KEYS[3], ARGV[2])
if not v then return 'none' end
local leaseId, i, id, count = string.match(v, '^(%S*) (%d) (%S+) (%d+)$')
if leaseId == '' then return 'none' end
if ARGV[3] ~= '' and ARGV[3] ~= leaseId then return 'lease_moved' end
i = tonumber(i); count = tonumber(count)
if ARGV[4] == 'ack' then
  redis.call('XACK', KEYS[i], ARGV[1], id)
  redis.call('HDEL', KEYS[3], ARGV[2])
  redis.call('SET', KEYS[5], '1', 'PX', ARGV[9])
  return 'ok'
end
local t = now()
if count >= tonumber(ARGV[7]) then
  local e = redis.call('XRANGE', KEYS[i], id, id)
  local json = ''
  if e[1] then json = field(e[1][2], 'e') end
  redis.call('XACK', KEYS[i], ARGV[1], id)
  redis.call('HDEL', KEYS[3], ARGV[2])
  redis.call('HSET', KEYS[4], ARGV[8], count .. '\\n' .. t .. '\\nnacked\\n' .. json)
  return 'ok'
end
redis.call('XCLAIM', KEYS[i], ARGV[1], 'c', 0, id, 'TIME', t + tonumber(ARGV[5]) - tonumber(ARGV[6]), 'JUSTID')
redis.call('HSET', KEYS[3], ARGV[2], ' ' .. i .. ' ' .. id .. ' ' .. count)
return 'ok'`;

// KEYS: dead hash, redrive stream. ARGV: dead field, event id, group.
const REQUEUE = `
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
local json = string.match(v, '^[^\\n]*\\n[^\\n]*\\n[^\\n]*\\n(.*)$')
pcall(redis.call, 'XGROUP', 'CREATE', KEYS[2], ARGV[3], '0', 'MKSTREAM')
redis.call('XADD', KEYS[2], '*', 'i', ARGV[2], 'e', json)
return 1`;

const REASONS: Record<string, (count: number) => string> = {
  expired: (count) => `lease expired or nacked after ${count} deliveries (EVENTS_MAX_DELIVERIES)`,
  nacked: (count) => `nacked after ${count} deliveries (EVENTS_MAX_DELIVERIES)`,
};

/**
 * The bus on Redis Streams (docs/events.md): one stream per tenant and topic read by consumer
 * groups (XREADGROUP; the PEL holds the leases, XAUTOCLAIM hands expired ones to the next
 * consumer, XPENDING gives the delivery count, XACK finishes), a stream per tenant for
 * listing, both trimmed by MINID to EVENTS_RETENTION. Every step that must be atomic is one
 * Lua script, so any number of instances share the groups.
 */
export class RedisEventLog implements EventLog {
  readonly #redis: Redis;
  readonly #p: string;
  readonly #options: Required<EventLogOptions>;

  constructor(redis: Redis, prefix: string, options: EventLogOptions) {
    this.#redis = redis;
    this.#p = `${prefix}:events:`;
    this.#options = { now: Date.now, ...options };
  }

  #keys(tenantId: string, topic: string, consumer: string) {
    const group = `${tenantId}:${topic}:${consumer}`;
    return [`${this.#p}s:${tenantId}:${topic}`, `${this.#p}r:${group}`, `${this.#p}l:${group}`, `${this.#p}d:${tenantId}`];
  }

  async publish(input: PublishInput): Promise<EventRecord> {
    const now = this.#options.now();
    const event: EventRecord = { id: newId("evt"), ...input, createdAt: new Date(now).toISOString() };
    const minId = Math.max(0, now - this.#options.retentionMs);
    await this.#redis.eval(
      PUBLISH,
      3,
      `${this.#p}s:${event.tenantId}:${event.topic}`,
      `${this.#p}t:${event.tenantId}`,
      `${this.#p}i:${event.id}`,
      event.id,
      JSON.stringify(event),
      minId,
      this.#options.retentionMs,
      event.tenantId,
    );
    return event;
  }

  async get(id: string): Promise<EventRecord | null> {
    // The index holds the tenant and the tenant stream's entry id.
    const entry = await this.#redis.get(`${this.#p}i:${id}`);
    if (!entry) return null;
    const [tenantId, streamId] = entry.split(" ") as [string, string];
    const entries = (await this.#redis.xrange(`${this.#p}t:${tenantId}`, streamId, streamId)) as [string, string[]][];
    const json = entries[0]?.[1][1];
    return json ? (JSON.parse(json) as EventRecord) : null;
  }

  async list(query: ListQuery) {
    const key = query.topic ? `${this.#p}s:${query.tenantId}:${query.topic}` : `${this.#p}t:${query.tenantId}`;
    const start = query.since !== undefined ? String(Math.max(0, query.since)) : "-";
    let end = query.cursor ? `(${query.cursor}` : "+";
    const events: EventRecord[] = [];
    let last = "";
    let nextCursor: string | null = null;
    // Type is filtered here: read in pages until the page is full or the stream ends.
    for (let scanned = 0; scanned < 10_000; ) {
      const batch = (await this.#redis.xrevrange(key, end, start, "COUNT", 200)) as [string, string[]][];
      if (batch.length === 0) break;
      scanned += batch.length;
      for (const [streamId, fields] of batch) {
        const event = JSON.parse(fields[fields.indexOf("e") + 1]!) as EventRecord;
        if (query.type && event.type !== query.type) continue;
        if (events.length === query.limit) {
          nextCursor = last;
          break;
        }
        events.push(event);
        last = streamId;
      }
      if (nextCursor || batch.length < 200) break;
      end = `(${batch.at(-1)![0]}`;
    }
    return { events, nextCursor };
  }

  async consume(query: ConsumeQuery): Promise<LeasedEvent[]> {
    const keys = this.#keys(query.tenantId, query.topic, query.consumer);
    const rows = (await this.#redis.eval(
      CONSUME,
      4,
      ...keys,
      query.consumer,
      query.max,
      Math.min(query.leaseMs, MAX_LEASE_MS),
      this.#options.maxDeliveries,
      MAX_LEASE_MS,
      `${randomBytes(9).toString("base64url")}.`,
      `${query.topic}|${query.consumer}|`,
    )) as [string, string, number, number][];
    return rows.map(([json, leaseId, count, until]) => ({
      event: JSON.parse(json) as EventRecord,
      leaseId,
      deliveryCount: Number(count),
      leaseExpiresAt: Number(until),
    }));
  }

  async leaseHolders(id: string): Promise<string[]> {
    const event = await this.get(id);
    if (!event) return [];
    const stream = `${this.#p}s:${event.tenantId}:${event.topic}`;
    let groups: string[];
    try {
      // XINFO GROUPS: a flat list of [name, …, …] per group.
      const info = (await this.#redis.call("XINFO", "GROUPS", stream)) as unknown[][];
      groups = info.map((fields) => String(fields[fields.indexOf("name") + 1]));
    } catch {
      return []; // no stream yet: nobody consumed the topic
    }
    const leases = await Promise.all(groups.map((group) => this.#redis.hget(this.#keys(event.tenantId, event.topic, group)[2]!, id)));
    // A lease entry is "<leaseId> <stream> <entry id> <count>"; an empty lease id is a nacked event waiting.
    return groups.filter((_, i) => leases[i] && !leases[i]!.startsWith(" ")).sort();
  }

  ack(query: SettleQuery) {
    return this.#settle(query, "ack", 0);
  }

  nack(query: SettleQuery & { delayMs: number }) {
    return this.#settle(query, "nack", query.delayMs);
  }

  async #settle(query: SettleQuery, mode: "ack" | "nack", delayMs: number): Promise<SettleResult> {
    const event = await this.get(query.id);
    if (!event) return "unknown";
    const keys = this.#keys(event.tenantId, event.topic, query.consumer);
    const acked = `${this.#p}a:${event.tenantId}:${event.topic}:${query.consumer}:${event.id}`;
    const deadField = `${event.topic}|${query.consumer}|${event.id}`;
    const result = (await this.#redis.eval(
      SETTLE,
      5,
      ...keys,
      acked,
      query.consumer,
      event.id,
      query.leaseId ?? "",
      mode,
      Math.min(delayMs, MAX_LEASE_MS),
      MAX_LEASE_MS,
      this.#options.maxDeliveries,
      deadField,
      this.#options.retentionMs,
    )) as string;
    if (result !== "none") return result as SettleResult;
    if (await this.#redis.exists(acked)) return "acked";
    if (await this.#redis.hexists(keys[3]!, deadField)) return "dead";
    return "not_leased";
  }

  async deadLetters(query: { tenantId: string; consumer?: string; topic?: string; limit: number }): Promise<DeadLetter[]> {
    const all = await this.#redis.hgetall(`${this.#p}d:${query.tenantId}`);
    const out: DeadLetter[] = [];
    for (const [name, value] of Object.entries(all)) {
      const [topic, consumer] = name.split("|");
      if ((query.consumer && consumer !== query.consumer) || (query.topic && topic !== query.topic)) continue;
      const [count, at, reason, ...json] = value.split("\n");
      const deliveries = Number(count);
      out.push({
        event: JSON.parse(json.join("\n")) as EventRecord,
        consumer: consumer!,
        deliveries,
        reason: REASONS[reason!]!(deliveries),
        deadAt: new Date(Number(at)).toISOString(),
      });
    }
    return out.sort((a, b) => b.deadAt.localeCompare(a.deadAt)).slice(0, query.limit);
  }

  async requeue(query: { id: string; consumer: string }): Promise<SettleResult> {
    const event = await this.get(query.id);
    if (!event) return "unknown";
    const keys = this.#keys(event.tenantId, event.topic, query.consumer);
    const done = await this.#redis.eval(
      REQUEUE,
      2,
      keys[3]!,
      keys[1]!,
      `${event.topic}|${query.consumer}|${event.id}`,
      event.id,
      query.consumer,
    );
    return Number(done) === 1 ? "ok" : "not_dead";
  }

  async close() {}
}
