/**
 * CPU of the in-process ledger per chat request: what a Platform chat does to the ledger —
 * one hold on four accounts (workspace credits, key spend, rpm committed, tpm) and one settle
 * — at BENCH_CONCURRENCY requests in flight, on a STORAGE=memory or fs store (LocalAtomic).
 * Prints CPU µs per request (process.cpuUsage, main thread), best of BENCH_ROUNDS rounds.
 *
 *   npx tsx bench/ledger.ts
 *   BENCH_STORAGES=memory,fs BENCH_REQUESTS=20000 BENCH_CONCURRENCY=16 npx tsx bench/ledger.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStore } from "../storage/store.js";

const storages = (process.env.BENCH_STORAGES ?? "memory,fs").split(",") as ("memory" | "fs")[];
const requests = Number(process.env.BENCH_REQUESTS ?? 20_000);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

async function run(storage: "memory" | "fs"): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), "bench-ledger-"));
  const store = await openStore({ STORAGE: storage, DATA_DIR: dir, REDIS_URL: "", REDIS_PREFIX: "" });
  const { atomic } = store;
  await atomic.adjust("credits:w1", 1_000_000_000);
  let next = 0;
  let best = Infinity;
  for (let round = 0; round < rounds + 1; round++) {
    const started = process.cpuUsage();
    let issued = 0;
    const worker = async () => {
      while (issued < requests) {
        issued++;
        const id = `hold_${next++}`;
        const refused = await atomic.hold(
          id,
          [
            { key: "credits:w1", kind: "balance", amount: 2_000 },
            { key: "key-spend:k1", kind: "usage", amount: 2_000, limit: 1e12 },
            { key: "rpm:k1", kind: "usage", amount: 1, limit: 1e9, windowMs: 60_000, commit: true },
            { key: "tpm:k1", kind: "usage", amount: 500, limit: 1e12, windowMs: 60_000 },
          ],
          60_000,
        );
        if (refused) throw new Error(`refused: ${JSON.stringify(refused)}`);
        await atomic.settle(id, [
          { key: "credits:w1", delta: -1_200 },
          { key: "key-spend:k1", delta: 1_200 },
          { key: "tpm:k1", delta: 300, windowMs: 60_000 },
        ]);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const used = process.cpuUsage(started);
    // The first round warms up the JIT and is not counted.
    if (round > 0) best = Math.min(best, (used.user + used.system) / requests);
  }
  await store.close();
  await rm(dir, { recursive: true, force: true });
  return best;
}

for (const storage of storages) {
  const perRequest = await run(storage);
  console.log(
    `${storage}: ${perRequest.toFixed(1)} µs CPU per hold + settle (4 accounts, c=${concurrency}, ${requests} requests, best of ${rounds})`,
  );
}
