import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { openStore, type Store, type StoreOptions } from "../../storage/store.js";
import { AuditRepo, type AuditRecord } from "../../storage/repos/audit.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";

/** The audit log's storage (docs/audit.md "Storage"): per-tenant pages, newest first, on every driver. */

const dirs: string[] = [];
const prefixes: string[] = [];

afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

const record = (tenantId: string, at: number, target: string): Omit<AuditRecord, "id"> => ({
  tenantId,
  at: new Date(at).toISOString(),
  actor: { kind: "session", userId: "usr_a", keyId: null },
  action: "key.created",
  target,
  requestId: `req-${target}`,
  changes: {},
});

describe.each(["memory", "fs", "redis"] as const)("audit log on %s", (driver) => {
  let store: Store;

  beforeEach(async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-audit-"));
    dirs.push(dir);
    const prefix = uniqueRedisPrefix();
    prefixes.push(prefix);
    const options: StoreOptions = { STORAGE: driver, DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix };
    store = await openStore(options);
  });
  afterEach(async () => {
    await store.close();
  });

  it("pages a tenant's records newest first, and never another tenant's", async () => {
    const audit = new AuditRepo(store);
    const start = Date.parse("2026-01-01T00:00:00Z");
    // Written out of order: the listing orders by time, not by write.
    for (const minute of [3, 1, 4, 0, 2]) await audit.append(record("ten_a", start + minute * 60_000, `t${minute}`));
    await audit.append(record("ten_b", start + 10 * 60_000, "other"));

    const first = await audit.page("ten_a", { limit: 2 });
    expect(first.records.map((r) => r.target)).toEqual(["t4", "t3"]);
    expect(first.more).toBe(true);
    const second = await audit.page("ten_a", { after: first.records.at(-1)!.id, limit: 2 });
    expect(second.records.map((r) => r.target)).toEqual(["t2", "t1"]);
    const last = await audit.page("ten_a", { after: second.records.at(-1)!.id, limit: 2 });
    expect(last).toMatchObject({ records: [{ target: "t0", tenantId: "ten_a" }], more: false });
    expect((await audit.page("ten_b", { limit: 10 })).records.map((r) => r.target)).toEqual(["other"]);
    expect(await audit.page("ten_none", { limit: 10 })).toEqual({ records: [], more: false });
    expect(await audit.page("../bad", { limit: 10 })).toEqual({ records: [], more: false });
  });

  it("lists records of the same millisecond in reverse write order", async () => {
    const audit = new AuditRepo(store);
    const at = Date.parse("2026-02-01T00:00:00Z");
    for (const target of ["a", "b", "c", "d"]) await audit.append(record("ten_same", at, target));
    expect((await audit.page("ten_same", { limit: 10 })).records.map((r) => r.target)).toEqual(["d", "c", "b", "a"]);
  });
});
