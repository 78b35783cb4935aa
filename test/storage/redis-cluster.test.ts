import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../storage/store.js";
import { startupFailure } from "../../scripts/startup-errors.js";
import { startPrivateCluster, type PrivateCluster } from "../helpers/redis-cluster.js";

/**
 * Redis Cluster (docs/storage.md "Redis Cluster") on a real cluster of three masters started
 * here: the service cannot run on one yet, and says so at start, naming the reason and what to
 * use instead, rather than failing with MOVED at the first request (or CROSSSLOT in a script).
 */
let cluster: PrivateCluster;

beforeAll(async () => {
  cluster = await startPrivateCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

describe("a Redis Cluster node in REDIS_URL", () => {
  it("stops the start with one line that says why, whichever node it names", async () => {
    for (const node of cluster.nodes) {
      const env = { STORAGE: "redis" as const, DATA_DIR: "/nonexistent", REDIS_URL: node.url, REDIS_PREFIX: "gw" };
      const error = await openStore(env).then(
        () => new Error("opened"),
        (caught: Error) => caught,
      );
      expect(error).toMatchObject({ code: "REDIS_SETUP" });
      const line = startupFailure(error, env);
      expect(line).toBe(
        `Invalid configuration: REDIS_URL=${node.url}: Redis at ${node.url} is a node of a Redis Cluster (cluster_enabled:1), ` +
          "which the service cannot use yet: its ledger scripts, record writes and event publishes touch keys of several slots in one step " +
          '(docs/storage.md "Redis Cluster"); use one Redis, with Sentinel (REDIS_SENTINELS) for failover',
      );
      // Refused before anything was written: no index marker, no reindex.
      expect(await node.admin.dbsize()).toBe(0);
    }
  });
});
