import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../storage/store.js";
import { startupFailure } from "../../scripts/startup-errors.js";
import { platformAccount, type PlatformAccount } from "../helpers/chat.js";
import { eventually } from "../helpers/eventually.js";
import { startSentinelSetup, type SentinelSetup } from "../helpers/sentinel.js";
import { bearer, startTestServer, type TestServer } from "../helpers/server.js";

/**
 * Redis behind Sentinel (docs/storage.md "TLS, Sentinel and Cluster"), on real processes of this
 * file's own: a master, a replica and a sentinel. The service finds the master through the
 * sentinel; when the master is killed the sentinel promotes the replica, and the service goes
 * on by itself with every acknowledged write that had reached the replica (Redis replicates
 * asynchronously: the guarantee the docs state).
 */
const REDIS_PASSWORD = "redis-secret-123";
const SENTINEL_PASSWORD = "sentinel-secret-456";
let setup: SentinelSetup;
let server: TestServer;
let account: PlatformAccount;

beforeAll(async () => {
  // Passwords on the servers and on the sentinel, as a production set-up has.
  setup = await startSentinelSetup("gwmaster", { redis: REDIS_PASSWORD, sentinel: SENTINEL_PASSWORD });
  server = await startTestServer({
    STORAGE: "redis",
    // With sentinels REDIS_URL gives only the scheme, credentials and database: its host is not used.
    REDIS_URL: `redis://:${REDIS_PASSWORD}@unused.invalid:1`,
    REDIS_SENTINELS: setup.sentinels,
    REDIS_SENTINEL_NAME: setup.name,
    REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
    REDIS_PREFIX: "gw",
    WEBHOOKS_POLL_MS: "0",
  });
  // Requests that land while the master is gone are answered 503 and logged: expected here.
  server.allowLoggedErrors(() => true);
  account = await platformAccount(server);
}, 60_000);
afterAll(async () => {
  await server?.close();
  await setup?.stop();
});

const chat = (key: string) =>
  server.request("/api/v1/chat/completions", {
    method: "POST",
    headers: bearer(key),
    json: { model: "echo-1", messages: [{ role: "user", content: "hi" }] },
  });
const balance = () => server.composition.ports.repos.credits.balance(account.workspaceId);

describe("Sentinel", () => {
  it("writes to the master the sentinel names", async () => {
    expect(await setup.masterAddress()).toBe(`127.0.0.1:${setup.master.port}`);
    expect((await chat(account.key)).status).toBe(200);
    expect(await setup.master.admin.keys("gw:*")).not.toHaveLength(0);
    // The replica refuses writes: nothing went there but replication.
    await expect(setup.replica.admin.set("gw:probe-replica", "1")).rejects.toThrow(/READONLY/);
  });

  it("survives the master's death: the replica is promoted, acknowledged data is all there, and requests succeed again", async () => {
    for (let i = 0; i < 5; i++) expect((await chat(account.key)).status).toBe(200);
    const charged = await balance();
    const keys = (await setup.master.admin.keys("gw:*")).sort();
    await setup.replicated();
    process.kill(setup.master.pid, "SIGKILL");
    await eventually(async () => (await setup.masterAddress()) === `127.0.0.1:${setup.replica.port}`, 15_000).catch((error: Error) => {
      throw new Error(`${error.message}: no failover; the sentinel's log:\n${setup.sentinelLog().split("\n").slice(-25).join("\n")}`);
    });
    // The service finds the new master by itself: requests and /readyz succeed again.
    let last: unknown;
    await eventually(async () => {
      const answer = await chat(account.key);
      last = answer.body;
      return answer.status === 200;
    }, 15_000).catch((error: Error) => {
      throw new Error(`${error.message}: the service did not recover; its last answer: ${JSON.stringify(last)}`);
    });
    await eventually(async () => (await server.request("/readyz")).status === 200, 5_000);
    // Nothing acknowledged was lost: every key of the old master is on the new one, the balance
    // is the one after the five charges less what the requests since cost.
    const now = new Set(await setup.replica.admin.keys("gw:*"));
    expect(keys.filter((key) => !now.has(key) && !key.includes(":probe:"))).toEqual([]);
    const after = await balance();
    expect(after).toBeLessThan(charged);
    expect(server.logs().filter((line) => line.status === 500)).toEqual([]);
  }, 40_000);
});

describe("Sentinel settings", () => {
  it("needs both the sentinels and the master's name, and says which is missing", async () => {
    const base = {
      STORAGE: "redis" as const,
      DATA_DIR: "/nonexistent",
      REDIS_URL: `redis://:${REDIS_PASSWORD}@127.0.0.1:1`,
      REDIS_PREFIX: "gw",
      REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
    };
    const failure = async (extra: Record<string, string>) => {
      const error = await openStore({ ...base, ...extra }).then(
        () => new Error("opened"),
        (caught: Error) => caught,
      );
      return startupFailure(error, { ...base, ...extra });
    };
    expect(await failure({ REDIS_SENTINELS: setup.sentinels })).toMatch(
      /^Invalid configuration: REDIS_SENTINEL_NAME: is needed with REDIS_SENTINELS/,
    );
    expect(await failure({ REDIS_SENTINEL_NAME: "gwmaster" })).toMatch(
      /^Invalid configuration: REDIS_SENTINELS: is needed with REDIS_SENTINEL_NAME/,
    );
    expect(await failure({ REDIS_SENTINELS: "127.0.0.1", REDIS_SENTINEL_NAME: "gwmaster" })).toMatch(
      /^Invalid configuration: REDIS_SENTINELS=127\.0\.0\.1: "127\.0\.0\.1" is not host:port/,
    );
    // No sentinel there.
    expect(await failure({ REDIS_SENTINELS: "127.0.0.1:1", REDIS_SENTINEL_NAME: "gwmaster" })).toMatch(
      /^Invalid configuration: REDIS_SENTINELS=127\.0\.0\.1:1: Redis did not answer \(failed to connect to sentinel 127\.0\.0\.1:1 because /,
    );
    // The sentinel's password missing or wrong, and the master's: said, and never printed.
    for (const wrong of [{ REDIS_SENTINEL_PASSWORD: "" }, { REDIS_SENTINEL_PASSWORD: "wrong-sentinel-pw" }]) {
      const line = await failure({ REDIS_SENTINELS: setup.sentinels, REDIS_SENTINEL_NAME: "gwmaster", ...wrong });
      expect(line).toMatch(
        /^Invalid configuration: REDIS_SENTINEL_PASSWORD: the sentinel 127\.0\.0\.1:\d+ refused the connection \((NOAUTH|WRONGPASS) .*\); give the sentinels' requirepass$/,
      );
      expect(line).not.toContain("wrong-sentinel-pw");
    }
    const badMaster = await failure({
      REDIS_SENTINELS: setup.sentinels,
      REDIS_SENTINEL_NAME: "gwmaster",
      REDIS_URL: "redis://:wrong-redis-pw@x:1",
    });
    expect(badMaster).toMatch(
      /^Invalid configuration: REDIS_URL=redis:\/\/:\*\*\*@x:1: the master "gwmaster" of the sentinels .*: refused the user and password in REDIS_URL \(WRONGPASS /,
    );
    expect(badMaster).not.toContain("wrong-redis-pw");
    // A name the sentinel does not watch.
    expect(await failure({ REDIS_SENTINELS: setup.sentinels, REDIS_SENTINEL_NAME: "nosuch" })).toMatch(
      /^Invalid configuration: REDIS_SENTINEL_NAME=nosuch: the sentinel 127\.0\.0\.1:\d+ watches no master of that name/,
    );
  }, 40_000);
});
