import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { jwtVerify, SignJWT, importJWK } from "jose";
import { openStore, type Store, type StoreOptions } from "../../storage/store.js";
import { SecretBox } from "../../storage/secret-box.js";
import { OAuthRecordsRepo } from "../../storage/repos/oauth-records.js";
import { OAuthConsentsRepo } from "../../storage/repos/oauth-consents.js";
import { OAuthKeysRepo } from "../../storage/repos/oauth-keys.js";
import { OAuthKeyRing, publicJwk, verificationKeyObject } from "../../rpc/credentials/oauth-keys.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";
import { rawFiles, rawRedis } from "../helpers/raw-storage.js";

/**
 * The authorization server's storage (docs/mcp.md "What is stored") on every driver: records
 * keyed by a hash of their id (a code or refresh token is never stored usable), client secrets
 * sealed, one consumption among concurrent ones, a revoked grant's records gone at once, the
 * consent page's decision taken once; and the signing keys rotated on schedule by whichever
 * instance sees it due, the others agreeing.
 */

const box = new SecretBox("an-oauth-test-secret-of-at-least-32-characters");
const DAY = 86_400_000;
const dirs: string[] = [];
const prefixes: string[] = [];

async function optionsFor(driver: StoreOptions["STORAGE"]): Promise<StoreOptions> {
  const dir = await mkdtemp(join(tmpdir(), "gw-oauth-"));
  dirs.push(dir);
  const prefix = uniqueRedisPrefix();
  prefixes.push(prefix);
  return { STORAGE: driver, DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix };
}

afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

describe.each(["memory", "fs", "redis"] as const)("OAuth storage on %s", (driver) => {
  let store: Store;
  let options: StoreOptions;
  beforeEach(async () => {
    options = await optionsFor(driver);
    store = await openStore(options);
  });
  afterEach(async () => {
    await store.close();
  });

  /** Everything the driver holds, as text (fs: the data directory's files; Redis: the prefix's values). */
  async function raw(): Promise<string> {
    // fs: every write is durable when it resolves (storage/journal.ts), so the files hold it already.
    if (driver === "fs") return rawFiles(options.DATA_DIR);
    if (driver === "redis") return rawRedis(options.REDIS_PREFIX);
    return "";
  }

  it("keeps records under a hash of their id, seals client secrets, and consumes a record once", async () => {
    const records = new OAuthRecordsRepo(store.atomic, box, { grantMemoryMs: DAY });
    const refresh = "rt-secret-value-0123456789";
    const exp = Math.floor(Date.now() / 1000) + 3600;
    await records.upsert("RefreshToken", refresh, { jti: refresh, grantId: "grant-1", accountId: "usr_1", exp }, 3600);
    await records.upsert("Client", "client-1", { client_id: "client-1", client_secret: "client-secret-value-xyz" });
    expect(await records.find("RefreshToken", refresh)).toMatchObject({ jti: refresh, grantId: "grant-1" });
    expect(await records.find("Client", "client-1")).toMatchObject({ client_secret: "client-secret-value-xyz" });
    const stored = await raw();
    if (driver !== "memory") {
      expect(stored).toContain("oauth:");
      expect(stored).not.toContain(refresh);
      expect(stored).not.toContain("client-secret-value-xyz");
    }
    const outcomes = await Promise.all(Array.from({ length: 8 }, () => records.consume("RefreshToken", refresh)));
    expect(outcomes.filter(Boolean)).toHaveLength(1);
    expect((await records.find("RefreshToken", refresh))?.consumed).toBeTypeOf("number");
    // A revoked grant's records read as gone at once.
    await records.revokeGrant("grant-1");
    expect(await records.find("RefreshToken", refresh)).toBeUndefined();
    expect(await records.isGrantRevoked("grant-1")).toBe(true);
  });

  it("lists a user's consents, drops revoked ones, and takes a decision once for the nonce it was given", async () => {
    const consents = new OAuthConsentsRepo(store.atomic);
    const expiresAt = new Date(Date.now() + DAY).toISOString();
    const base = {
      userId: "usr_a",
      tenantId: "ten_a",
      clientName: "c",
      registration: "dynamic" as const,
      resource: "r",
      scopes: ["mcp:read"],
      expiresAt,
    };
    await consents.putConsent({ ...base, id: "g1", clientId: "c1", createdAt: "2026-01-01T00:00:00.000Z" });
    await consents.putConsent({ ...base, id: "g2", clientId: "c2", createdAt: "2026-01-02T00:00:00.000Z" });
    await consents.putConsent({ ...base, id: "g3", userId: "usr_b", clientId: "c3", createdAt: "2026-01-03T00:00:00.000Z" });
    expect((await consents.listConsents("usr_a")).map((consent) => consent.id)).toEqual(["g1", "g2"]);
    await consents.deleteConsent({ id: "g1", userId: "usr_a" });
    expect((await consents.listConsents("usr_a")).map((consent) => consent.id)).toEqual(["g2"]);
    expect((await consents.listConsents("usr_b")).map((consent) => consent.id)).toEqual(["g3"]);

    const pending = {
      uid: "uid-0123456789",
      clientId: "c1",
      clientName: "c",
      registration: "dynamic" as const,
      applicationType: "native" as const,
      redirectUri: "http://127.0.0.1/cb",
      resource: "r",
      scopes: ["mcp:read"],
      returnTo: "/oauth/authorize/uid-0123456789",
      createdAt: new Date().toISOString(),
      expiresAt: new Date(Date.now() + 60_000).toISOString(),
    };
    await consents.putPending(pending);
    const views = await Promise.all([consents.viewPending(pending.uid, "usr_a"), consents.viewPending(pending.uid, "usr_b")]);
    expect(views.filter(Boolean)).toHaveLength(1);
    const viewer = views[0] ? "usr_a" : "usr_b";
    const decision = {
      userId: viewer,
      approve: true,
      tenantId: "t",
      scopes: ["mcp:read"],
      nonceHash: "n",
      decidedAt: new Date().toISOString(),
    };
    const decided = await Promise.all([consents.decide(pending.uid, decision), consents.decide(pending.uid, decision)]);
    expect(decided.filter(Boolean)).toHaveLength(1);
    expect(await consents.takeDecision(pending.uid, "other-nonce")).toBeUndefined();
    const taken = await Promise.all([consents.takeDecision(pending.uid, "n"), consents.takeDecision(pending.uid, "n")]);
    expect(taken.filter(Boolean)).toHaveLength(1);
  });

  it("rotates the signing keys on schedule; two instances agree; a retired key leaves the JWKS", async () => {
    let now = Date.parse("2026-03-01T00:00:00Z");
    const options = { rotationMs: 10 * DAY, tokenLifetimeMs: 600_000, refreshMs: 0, now: () => now };
    const one = new OAuthKeyRing(new OAuthKeysRepo(store.atomic, box), options);
    const two = new OAuthKeyRing(new OAuthKeysRepo(store.atomic, box), options);
    const [first, other] = await Promise.all([one.current(), two.current()]);
    expect(first.signing.kid).toBe(other.signing.kid);
    expect(first.published).toHaveLength(1);
    if (driver !== "memory") expect(await raw()).not.toContain(String(first.signing.jwk.d));

    // A token signed now verifies with the key another instance publishes.
    const signed = await new SignJWT({ sub: "u" })
      .setProtectedHeader({ alg: "ES256", kid: first.signing.kid })
      .setExpirationTime("10m")
      .sign(await importJWK(first.signing.jwk, "ES256"));
    await jwtVerify(signed, await verificationKeyObject((await two.verificationKey(first.signing.kid))!), { currentDate: new Date(now) });

    // Within a day of the end of its period, its successor is published (not signing yet).
    now += 9.5 * DAY;
    const ahead = await two.current();
    expect(ahead.signing.kid).toBe(first.signing.kid);
    expect(ahead.published.map((key) => key.kid)).toHaveLength(2);
    const next = ahead.published.find((key) => key.kid !== first.signing.kid)!;
    expect(next.signsFrom).toBe(first.signing.signsUntil);
    expect(publicJwk(next)).not.toHaveProperty("d");

    // Past the period, the successor signs; the old key stays published while its tokens live.
    now = first.signing.signsUntil + 1;
    const rotated = await one.current();
    expect(rotated.signing.kid).toBe(next.kid);
    expect(rotated.published.map((key) => key.kid)).toContain(first.signing.kid);
    expect(await one.verificationKey(first.signing.kid)).toBeDefined();
    now = first.signing.retiresAt + 1;
    const retired = await two.current();
    expect(retired.published.map((key) => key.kid)).not.toContain(first.signing.kid);
    expect(retired.signing.kid).toBe(next.kid);
  });
});
