import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { eventually } from "./eventually.js";
import type { CertificateSet } from "./tls.js";
import { freePort, startPrivateRedis, type PrivateRedis } from "./private-redis.js";

export interface SentinelSetup {
  /** `host:port,…` for REDIS_SENTINELS. */
  sentinels: string;
  /** The master's name for REDIS_SENTINEL_NAME. */
  name: string;
  master: PrivateRedis;
  replica: PrivateRedis;
  /** The ports the sentinel names them by (their TLS ports with certificates). */
  masterPort: number;
  replicaPort: number;
  /** The address the sentinel gives for the master now. */
  masterAddress(): Promise<string>;
  /** The sentinel's log (+sdown, +odown, +promoted-slave …), for a failure's message. */
  sentinelLog(): string;
  /** Waits until the replica has every write the master has (their replication offsets equal). */
  replicated(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A master, a replica and one sentinel (quorum 1) on loopback ports, real redis-server
 * processes, with timeouts short enough for a failover in about two seconds
 * (down-after-milliseconds 500, failover-timeout 2000). Every process is killed with the test
 * process even if it dies; `stop` ends them all.
 */
export async function startSentinelSetup(
  name = "gwmaster",
  passwords: { redis?: string; sentinel?: string } = {},
  certificates?: CertificateSet,
): Promise<SentinelSetup> {
  const started: { stop(): Promise<void> }[] = [];
  const stopAll = async () => {
    for (const one of started.reverse()) await one.stop().catch(() => undefined);
  };
  try {
    // With a password, each server asks it of clients and of each other (the replica of a promoted
    // master, or the old master once demoted), and the sentinel gives it (auth-pass).
    const auth = passwords.redis ? ["--requirepass", passwords.redis, "--masterauth", passwords.redis] : [];
    // With certificates every server also has a TLS port, asks clients for a certificate, and
    // replicates over TLS: the addresses the sentinel gives are the TLS ports.
    const [masterTls, replicaTls] = certificates ? [await freePort(), await freePort()] : [0, 0];
    const tls = (port: number) => (certificates ? ["--tls-port", String(port), ...tlsArgs(certificates)] : []);
    const master = await startPrivateRedis([...auth, ...tls(masterTls)]);
    started.push(master);
    const replica = await startPrivateRedis([
      ...auth,
      ...tls(replicaTls),
      "--replicaof",
      "127.0.0.1",
      String(certificates ? masterTls : master.port),
    ]);
    started.push(replica);
    await eventually(async () => /master_link_status:up/.test(await replica.admin.info("replication")), 10_000);
    const sentinel = await startSentinel(name, certificates ? masterTls : master.port, passwords, certificates);
    started.push(sentinel);
    // The sentinel has found the replica (through the master's INFO) before anything fails.
    await eventually(async () => ((await sentinel.client.call("SENTINEL", "REPLICAS", name)) as unknown[]).length === 1, 10_000);
    return {
      sentinels: `127.0.0.1:${sentinel.port}`,
      name,
      master,
      replica,
      masterPort: certificates ? masterTls : master.port,
      replicaPort: certificates ? replicaTls : replica.port,
      async masterAddress() {
        const [host, port] = (await sentinel.client.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)) as string[];
        return `${host}:${port}`;
      },
      async replicated() {
        const offset = (info: string, field: string) => Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? -1);
        await eventually(async () => {
          const [ofMaster, ofReplica] = await Promise.all([master.admin.info("replication"), replica.admin.info("replication")]);
          return offset(ofMaster, "master_repl_offset") === offset(ofReplica, "slave_repl_offset");
        }, 5_000);
      },
      sentinelLog: sentinel.log,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** One redis-server in sentinel mode watching the master at `masterPort`, its config file in a directory of its own. */
/** redis-server's TLS settings: its certificate, the CA it trusts, clients' certificates asked for, replication over TLS. */
function tlsArgs(certificates: CertificateSet): string[] {
  return [
    "--tls-cert-file",
    certificates.serverCertFile,
    "--tls-key-file",
    certificates.serverKeyFile,
    "--tls-ca-cert-file",
    certificates.caFile,
    "--tls-auth-clients",
    "yes",
    "--tls-replication",
    "yes",
  ];
}

async function startSentinel(
  name: string,
  masterPort: number,
  passwords: { redis?: string; sentinel?: string },
  certificates?: CertificateSet,
): Promise<{ port: number; client: Redis; log(): string; stop(): Promise<void> }> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "gw-sentinel-"));
  const config = join(dir, "sentinel.conf");
  const tls = certificates
    ? [
        "port 0",
        `tls-port ${port}`,
        `tls-cert-file ${certificates.serverCertFile}`,
        `tls-key-file ${certificates.serverKeyFile}`,
        `tls-ca-cert-file ${certificates.caFile}`,
        "tls-auth-clients yes",
        "tls-replication yes",
      ]
    : [`port ${port}`];
  writeFileSync(
    config,
    [
      ...tls,
      "bind 127.0.0.1",
      `dir ${dir}`,
      `logfile ${join(dir, "sentinel.log")}`,
      `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
      `sentinel down-after-milliseconds ${name} 500`,
      `sentinel failover-timeout ${name} 2000`,
      `sentinel parallel-syncs ${name} 1`,
      ...(passwords.redis ? [`sentinel auth-pass ${name} ${passwords.redis}`] : []),
      ...(passwords.sentinel ? [`requirepass ${passwords.sentinel}`] : []),
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn("redis-server", [config, "--sentinel"], { stdio: "ignore" });
  const orphaned = () => child.kill("SIGKILL");
  process.once("exit", orphaned);
  const client = new Redis({
    host: "127.0.0.1",
    port,
    password: passwords.sentinel,
    ...(certificates
      ? {
          tls: {
            ca: readFileSync(certificates.caFile),
            cert: readFileSync(certificates.clientCertFile),
            key: readFileSync(certificates.clientKeyFile),
          },
        }
      : {}),
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 50,
  });
  client.on("error", () => undefined);
  const stop = async () => {
    process.off("exit", orphaned);
    client.disconnect();
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, "exit");
      child.kill("SIGKILL");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await eventually(async () => {
      if (child.exitCode !== null) throw new Error(`redis-server --sentinel on port ${port} exited (${child.exitCode})`);
      if (client.status === "wait") await client.connect();
      return (await client.ping()) === "PONG";
    }, 10_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return { port, client, log: () => readFileSync(join(dir, "sentinel.log"), "utf8"), stop };
}
