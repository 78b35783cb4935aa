/**
 * Event bus and webhook throughput (issue 10), in this process, loopback only:
 *
 *   publish       events/s appended, with 1 and 16 concurrent producers
 *   consume+ack   events/s leased (batches of 10) and acknowledged, 1 and 16 concurrent consumers of one group
 *
 * on the in-process bus (memory driver) and on Redis Streams (REDIS_URL, default
 * redis://127.0.0.1:6379, under a temporary prefix removed at the end); then webhook
 * deliveries/s: signed POSTs to a local receiver, 16 at a time.
 *
 *   npm run bench:events     (BENCH_EVENTS=N overrides the events per run, default 5000)
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { openStore, type Store } from "../storage/store.js";
import type { EventLog } from "../storage/events/event-log.js";
import { LocalEventLog } from "../storage/events/local-event-log.js";
import { RedisEventLog } from "../storage/events/redis-event-log.js";
import { WebhooksRepo } from "../storage/repos/webhooks.js";
import { SecretBox } from "../storage/secret-box.js";
import { WebhookWorker } from "../rpc/webhooks/worker.js";

const N = Number(process.env.BENCH_EVENTS ?? 5000);
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const OPTIONS = { maxDeliveries: 5, retentionMs: 3600_000 };

async function timed(fn: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await fn();
  return (performance.now() - started) / 1000;
}

async function publishRate(log: EventLog, tenantId: string, concurrency: number): Promise<number> {
  let next = 0;
  const seconds = await timed(async () => {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < N) {
          next++;
          await log.publish({
            tenantId,
            topic: "bench",
            type: "bench.event",
            source: "bench",
            payload: { n: next, text: "a small payload" },
          });
        }
      }),
    );
  });
  return N / seconds;
}

async function consumeRate(log: EventLog, tenantId: string, concurrency: number): Promise<number> {
  let done = 0;
  const seconds = await timed(async () => {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (;;) {
          const leases = await log.consume({ tenantId, topic: "bench", consumer: "workers", max: 10, leaseMs: 60_000 });
          if (leases.length === 0) return;
          await Promise.all(leases.map((lease) => log.ack({ id: lease.event.id, consumer: "workers", leaseId: lease.leaseId })));
          done += leases.length;
        }
      }),
    );
  });
  if (done !== N) throw new Error(`consumed ${done} of ${N}`);
  return done / seconds;
}

async function busFigures(name: string, log: EventLog) {
  for (const concurrency of [1, 16]) {
    const tenantId = `ten_bench${concurrency}${randomUUID().slice(0, 6)}`;
    const publish = await publishRate(log, tenantId, concurrency);
    const consume = await consumeRate(log, tenantId, concurrency);
    console.log(
      `${name.padEnd(6)} concurrency ${String(concurrency).padStart(2)}: ` +
        `publish ${Math.round(publish).toLocaleString("en")} events/s, consume+ack ${Math.round(consume).toLocaleString("en")} events/s`,
    );
  }
}

async function webhookFigures(store: Store) {
  let received = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received++;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const port = (receiver.address() as AddressInfo).port;
  const secrets = new SecretBox("bench-secret-of-at-least-32-characters!!");
  const repo = new WebhooksRepo(store);
  const worker = new WebhookWorker({
    config: {
      WEBHOOKS_ALLOW_PRIVATE: true,
      WEBHOOKS_TIMEOUT_SECONDS: 10,
      WEBHOOKS_POLL_MS: 0,
      WEBHOOKS_CONCURRENCY: 32,
      WEBHOOKS_TENANT_CONCURRENCY: 32,
      WEBHOOKS_LEASE_SECONDS: 5,
      WEBHOOKS_SEND_THREADS: 1,
    },
    log: { info() {}, warn() {}, error() {} },
    repo,
    secrets,
    resolveHost: async () => [{ address: "127.0.0.1", family: 4 }],
    onFailed: async () => undefined,
  });
  const now = new Date().toISOString();
  const sub = await repo.putSubscription({
    id: "whs_bench",
    tenantId: "ten_bench",
    url: `http://127.0.0.1:${port}/`,
    filter: ["*"],
    description: "",
    enabled: true,
    secret: secrets.seal(WebhookWorker.newSecret()),
    createdAt: now,
    updatedAt: now,
  });
  const count = Math.min(N, 2000);
  const seconds = await timed(async () => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < count) {
          next++;
          const event = {
            id: `evt_${next}`,
            tenantId: "ten_bench",
            topic: "bench",
            type: "bench.event",
            source: "bench",
            payload: { n: next },
            createdAt: now,
          };
          const [delivery] = await worker.fanOut(event, [sub]);
          await worker.attempt(delivery!.id, { manual: true }).catch(() => null);
        }
      }),
    );
    while (received < count) await new Promise((resolve) => setTimeout(resolve, 5));
  });
  console.log(
    `webhooks (memory store, 16 at a time): ${Math.round(count / seconds).toLocaleString("en")} deliveries/s signed and sent to a loopback receiver`,
  );
  await worker.close();
  receiver.close();
}

const memory = await openStore({ STORAGE: "memory", DATA_DIR: ".", REDIS_URL, REDIS_PREFIX: "x" });
await busFigures("memory", new LocalEventLog(memory.kv, { ...OPTIONS, persist: false }));
const prefix = `bench-${randomUUID().slice(0, 8)}`;
const redisStore = await openStore({ STORAGE: "redis", DATA_DIR: ".", REDIS_URL, REDIS_PREFIX: prefix });
try {
  await busFigures("redis", new RedisEventLog(redisStore.duplicateRedis!(), prefix, OPTIONS));
} finally {
  const redis = redisStore.duplicateRedis!();
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 500);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== "0");
  await redisStore.close();
}
await webhookFigures(memory);
await memory.close();
