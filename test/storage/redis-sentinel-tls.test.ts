import { afterAll, beforeAll, expect, it } from "vitest";
import { openStore, type Store } from "../../storage/store.js";
import { eventually } from "../helpers/eventually.js";
import { startSentinelSetup, type SentinelSetup } from "../helpers/sentinel.js";
import { type CertificateSet, makeCertificates } from "../helpers/tls.js";

/**
 * Sentinel and TLS together (docs/storage.md "TLS, Sentinel and Cluster"), as managed Redis
 * offers them: the master, the replica and the sentinel speak only TLS to the service and ask
 * for its client certificate; the service asks the sentinel over TLS, writes to the master over
 * TLS, and follows a failover to the replica.
 */
let certs: CertificateSet;
let setup: SentinelSetup;
let store: Store;

beforeAll(async () => {
  certs = await makeCertificates();
  setup = await startSentinelSetup("gwtls", {}, certs);
  store = await openStore({
    STORAGE: "redis",
    DATA_DIR: "/nonexistent",
    REDIS_URL: "rediss://unused.invalid:1",
    REDIS_PREFIX: "gw",
    REDIS_SENTINELS: setup.sentinels,
    REDIS_SENTINEL_NAME: setup.name,
    REDIS_TLS_CA_FILE: certs.caFile,
    REDIS_TLS_CERT_FILE: certs.clientCertFile,
    REDIS_TLS_KEY_FILE: certs.clientKeyFile,
  });
}, 60_000);
afterAll(async () => {
  await store?.close();
  await setup?.stop();
  await certs?.remove();
});

it("reaches the master through the sentinel over TLS and follows a failover", async () => {
  await store.kv.setItem("before", { n: 1 });
  await store.atomic.adjust("credits", 5);
  expect(await setup.master.admin.get("gw:kv:before")).toBe('{"n":1}');
  // Every connection of the service came in on the TLS port, none on the plain one.
  const ours = ((await setup.master.admin.client("LIST")) as string).split("\n").filter((line) => / name=gw:/.test(line));
  expect(ours.length).toBeGreaterThan(0);
  for (const line of ours) expect(line).toContain(`laddr=127.0.0.1:${setup.masterPort} `);
  await setup.replicated();
  process.kill(setup.master.pid, "SIGKILL");
  await eventually(async () => (await setup.masterAddress()) === `127.0.0.1:${setup.replicaPort}`, 15_000);
  await eventually(async () => {
    await store.kv.setItem("after", { n: 2 });
    return true;
  }, 15_000);
  expect(await store.kv.getItem("before")).toEqual({ n: 1 });
  expect(await store.atomic.balance("credits")).toBe(5);
  expect(await setup.replica.admin.get("gw:kv:after")).toBe('{"n":2}');
}, 40_000);
