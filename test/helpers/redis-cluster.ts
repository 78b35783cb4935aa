import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { eventually } from "./eventually.js";
import { startPrivateRedis, type PrivateRedis } from "./private-redis.js";

export interface PrivateCluster {
  /** The masters, each serving a third of the slots. */
  nodes: PrivateRedis[];
  /** `host:port,…` of every node. */
  addresses: string;
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of three masters (no replicas) on loopback ports: real redis-server
 * processes started with `--cluster-enabled yes`, joined by `redis-cli --cluster create`, ready
 * once every node reports `cluster_state:ok`. Every process ends with `stop` or with the test
 * process (startPrivateRedis), even when the set-up fails half-way.
 */
export async function startPrivateCluster(masters = 3): Promise<PrivateCluster> {
  const nodes: PrivateRedis[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stop().catch(() => undefined)));
  };
  try {
    for (let i = 0; i < masters; i++) {
      nodes.push(await startPrivateRedis(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"]));
    }
    const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
    await promisify(execFile)("redis-cli", ["--cluster", "create", ...addresses, "--cluster-replicas", "0", "--cluster-yes"], {
      timeout: 20_000,
    });
    await eventually(async () => {
      for (const node of nodes) if (!/cluster_state:ok/.test((await node.admin.call("CLUSTER", "INFO")) as string)) return false;
      return true;
    }, 15_000);
    return { nodes, addresses: addresses.join(","), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
