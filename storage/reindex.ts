import type { Redis } from "ioredis";
import { indexEntries, validParts } from "./collection.js";
import type { RedisIndexes } from "./indexes.js";
import { QUEUES } from "./layout.js";
import type { Change, RecordEngine } from "./record-map.js";

/**
 * Indexes for data written before them (docs/storage.md "Indexes: existing data"). A store
 * written by a version without indexes has its records but no index entries; the first start
 * of this version builds them from the records, once, and leaves a marker so later starts skip
 * it. It also moves webhook due times kept as one record per delivery (`webhook-due:<id>`)
 * into the due queue. On fs the records are in memory already; on Redis it is one SCAN of the
 * prefix's records at that start — the only one: nothing else walks the keyspace.
 */
const LAYOUT = "indexes-1";
/** The marker: a record on memory and fs, `<prefix>:layout` on Redis. */
const MARKER = "layout:indexes";

interface LegacyDue {
  id: string;
  tenantId: string;
  dueAt: number;
}

/** What the index of an existing record needs (nothing for a record that is not listed). */
function entriesOf(key: string, value: () => string | null | undefined): { changes: Change[]; remove: boolean } {
  const [name, ...parts] = key.split(":") as [string, ...string[]];
  if (!validParts(parts)) return { changes: [], remove: false };
  if (name === "webhook-due") {
    let due: LegacyDue | undefined;
    try {
      due = JSON.parse(value() ?? "null") as LegacyDue;
    } catch {
      due = undefined;
    }
    const changes: Change[] =
      due?.tenantId && due.id
        ? [{ op: "index", index: QUEUES.webhookDue, member: `${due.tenantId}:${due.id}`, score: Number(due.dueAt) || 0 }]
        : [];
    return { changes, remove: true };
  }
  if (name === "webhook-fanouts" && parts.length === 1) {
    // Due at once: the instance that stored it is the old version, stopped for the upgrade.
    return { changes: [{ op: "index", index: QUEUES.webhookFanOuts, member: parts[0]!, score: 0 }], remove: false };
  }
  return { changes: indexEntries(name, parts).map((entry) => ({ op: "index", ...entry, score: 0 })), remove: false };
}

/** Memory and fs: every record is in memory; the entries go in one write with the marker. Returns how many records were indexed. */
export async function reindexLocal(records: RecordEngine): Promise<number> {
  if (records.get(MARKER) === JSON.stringify(LAYOUT)) return 0;
  const changes: Change[] = [];
  let indexed = 0;
  for (const key of records.keys("")) {
    const { changes: entries, remove } = entriesOf(key, () => records.get(key));
    if (entries.length || remove) indexed += 1;
    changes.push(...entries);
    if (remove) changes.push({ op: "remove", key });
  }
  changes.push({ op: "set", key: MARKER, value: JSON.stringify(LAYOUT) });
  await records.write(changes);
  return indexed;
}

/**
 * KEYS: the record, then one index per entry. ARGV: "1" to remove the record after, then a
 * score and a member per index. The entries are added only while the record exists, so an
 * instance that already runs this version and removed a record meanwhile is never undone.
 */
const INDEX_IF_PRESENT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 2, #KEYS do redis.call('ZADD', KEYS[i], ARGV[2 * i - 2], ARGV[2 * i - 1]) end
if ARGV[1] == '1' then redis.call('DEL', KEYS[1]) end
return 1`;

/** Redis: one SCAN of `<prefix>:kv:*`, the entries added record by record (pipelined). Returns how many records were indexed. */
export async function reindexRedis(redis: Redis, prefix: string, indexes: RedisIndexes): Promise<number> {
  const marker = `${prefix}:layout`;
  if ((await redis.get(marker)) === LAYOUT) return 0;
  const base = indexes.recordKey("");
  const pattern = `${base.replace(/[*?[\]\\]/g, "\\$&")}*`;
  let indexed = 0;
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    cursor = next;
    const keys = found.map((full) => full.slice(base.length));
    const legacyDue = keys.filter((key) => key.startsWith("webhook-due:"));
    const values = new Map<string, string | null>();
    if (legacyDue.length) {
      const read = await redis.mget(...legacyDue.map((key) => indexes.recordKey(key)));
      for (const [i, key] of legacyDue.entries()) values.set(key, read[i] ?? null);
    }
    const pipeline = redis.pipeline();
    let queued = 0;
    for (const key of keys) {
      const { changes, remove } = entriesOf(key, () => values.get(key));
      const adds = changes.filter((change): change is Extract<Change, { op: "index" }> => change.op === "index");
      if (!adds.length && !remove) continue;
      pipeline.eval(
        INDEX_IF_PRESENT,
        1 + adds.length,
        indexes.recordKey(key),
        ...adds.map((change) => indexes.indexKey(change.index)),
        remove ? "1" : "0",
        ...adds.flatMap((change) => [change.score, change.member]),
      );
      queued += 1;
    }
    if (queued) {
      for (const [error, result] of (await pipeline.exec()) ?? []) {
        if (error) throw error;
        indexed += Number(result);
      }
    }
  } while (cursor !== "0");
  await redis.set(marker, LAYOUT);
  return indexed;
}
