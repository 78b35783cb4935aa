import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { runAdmin } from "../../../scripts/admin-commands.js";
import { inRollout } from "../../../rpc/updates/rollout-bucket.js";

const SERVICE_KEY = "service-key-of-at-least-24-characters";
const SHA = "a".repeat(64);

let server: TestServer;
let operator: Record<string, string>;
let alice: Record<string, string>;
let bob: Record<string, string>;
const service = bearer(SERVICE_KEY);

function release(component: string, version: string, extra: Record<string, unknown> = {}) {
  return {
    component,
    version,
    channel: "stable",
    notes: `notes ${version}`,
    url: `https://downloads.example.com/${component}/${version}`,
    sha256: SHA,
    size: 1024,
    ...extra,
  };
}
const publish = (headers: Record<string, string>, body: unknown) =>
  server.request("/gateway/v1/updates/releases", { method: "POST", headers, json: body });
const rollout = (body: unknown, headers = operator) =>
  server.request("/gateway/v1/updates/rollouts", { method: "POST", headers, json: body });
const check = (query: string, headers = alice) => server.request(`/gateway/v1/updates/check?${query}`, { headers });

beforeAll(async () => {
  server = await startTestServer({ PLATFORM_SERVICE_KEY: SERVICE_KEY });
  const op = await registerUser(server);
  await runAdmin(["grant-operator", "--email", op.email], server.composition);
  operator = bearer(op.token);
  alice = bearer((await registerUser(server)).token);
  bob = bearer((await registerUser(server)).token);
});
afterAll(async () => {
  await server.close();
});

describe("releases", () => {
  it("lets operators (a flagged user, PLATFORM_SERVICE_KEY) publish; others get 403; everyone signed in lists", async () => {
    expect((await publish(operator, release("desktop", "1.0.0"))).status).toBe(201);
    const byService = await publish(service, release("desktop", "1.1.0", { channel: "beta" }));
    expect(byService.status).toBe(201);
    expect(byService.body).toMatchObject({
      component: "desktop",
      version: "1.1.0",
      channel: "beta",
      rollout: { percentage: 100, effectivePercentage: 100 },
    });
    const refused = await publish(alice, release("desktop", "9.0.0"));
    expect(refused.status).toBe(403);
    expect(refused.body.error.code ?? refused.body.code).toBeDefined();
    expect((await server.request("/gateway/v1/updates/releases", { method: "POST", json: release("desktop", "9.0.0") })).status).toBe(401);
    for (const who of [alice, bob]) {
      const list = await server.request("/gateway/v1/updates/releases?component=desktop", { headers: who });
      expect(list.status).toBe(200);
      expect(list.body.data.map((r: { version: string }) => r.version)).toEqual(["1.1.0", "1.0.0"]);
    }
    const stableOnly = await server.request("/gateway/v1/updates/releases?component=desktop&channel=stable", { headers: bob });
    expect(stableOnly.body.data.map((r: { version: string }) => r.version)).toEqual(["1.0.0"]);
  });

  it("answers 409 for a duplicate (component, version), build metadata ignored", async () => {
    expect((await publish(operator, release("cli", "2.0.0+build.1"))).status).toBe(201);
    const again = await publish(operator, release("cli", "2.0.0"));
    expect(again.status).toBe(409);
    expect((await publish(service, release("cli", "2.0.0+build.2"))).status).toBe(409);
    const concurrent = await Promise.all([1, 2, 3].map(() => publish(operator, release("cli", "2.1.0"))));
    expect(concurrent.map((r) => r.status).sort()).toEqual([201, 409, 409]);
  });

  it("compares versions with SemVer, not as strings", async () => {
    for (const version of ["1.9.0", "1.10.0", "1.10.0-rc.1", "1.2.0"])
      expect((await publish(operator, release("semver", version))).status).toBe(201);
    const list = await server.request("/gateway/v1/updates/releases?component=semver", { headers: alice });
    expect(list.body.data.map((r: { version: string }) => r.version)).toEqual(["1.10.0", "1.10.0-rc.1", "1.9.0", "1.2.0"]);
    const answer = await check("component=semver&currentVersion=1.9.0&clientId=c1");
    expect(answer.body.latest.version).toBe("1.10.0");
  });

  it("refuses bad releases with 400 naming the field", async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ version: "1.0" }, /SemVer/],
      [{ version: "v1.0.0" }, /SemVer/],
      [{ version: "01.0.0" }, /SemVer/],
      [{ channel: "nightly" }, /stable, beta, canary/],
      [{ sha256: "xyz" }, /sha256/],
      [{ size: -1 }, /size/],
      [{ url: "ftp://x" }, /url/],
      [{ minimumVersion: "2.0.0", version: "1.0.0" }, /minimumVersion/],
      [{ component: "Bad Name" }, /component/],
    ];
    for (const [patch, message] of cases) {
      const res = await publish(operator, { ...release("bad", "1.0.0"), ...patch });
      expect(res.status, JSON.stringify(patch)).toBe(400);
      expect(JSON.stringify(res.body)).toMatch(message);
    }
  });
});

describe("rollouts and check", () => {
  it("offers the highest release of the visible channels; beta sees stable; canary sees all", async () => {
    await publish(operator, release("app", "1.0.0"));
    await publish(operator, release("app", "1.1.0-beta.1", { channel: "beta" }));
    await publish(operator, release("app", "1.2.0-canary.1", { channel: "canary" }));
    await publish(operator, release("app", "1.1.0"));
    const latest = async (channel: string) =>
      (await check(`component=app&currentVersion=0.9.0&channel=${channel}&clientId=c`)).body.latest.version;
    expect(await latest("stable")).toBe("1.1.0");
    expect(await latest("beta")).toBe("1.1.0");
    expect(await latest("canary")).toBe("1.2.0-canary.1");
    const none = await check("component=app&currentVersion=1.1.0&clientId=c");
    expect(none.body).toMatchObject({ updateAvailable: false, current: "1.1.0", latest: null });
    expect((await check("component=unknown-thing&currentVersion=1.0.0")).body.updateAvailable).toBe(false);
  });

  it("is cacheable: Cache-Control, ETag, and 304 for a matching If-None-Match", async () => {
    const first = await check("component=app&currentVersion=1.0.0&clientId=c9");
    expect(first.status).toBe(200);
    expect(first.headers.get("cache-control")).toMatch(/max-age=\d+/);
    const etag = first.headers.get("etag")!;
    expect(etag).toMatch(/^".+"$/);
    const again = await server.request("/gateway/v1/updates/check?component=app&currentVersion=1.0.0&clientId=c9", {
      headers: { ...alice, "if-none-match": etag },
    });
    expect(again.status).toBe(304);
    const other = await server.request("/gateway/v1/updates/check?component=app&currentVersion=1.1.0&clientId=c9", {
      headers: { ...alice, "if-none-match": etag },
    });
    expect(other.status).toBe(200);
  });

  it("marks an update mandatory when the current version is below a release's minimumVersion", async () => {
    await publish(operator, release("agent", "2.0.0", { minimumVersion: "1.5.0" }));
    expect((await check("component=agent&currentVersion=1.4.9&clientId=x")).body.latest).toMatchObject({
      version: "2.0.0",
      mandatory: true,
    });
    expect((await check("component=agent&currentVersion=1.5.0&clientId=x")).body.latest).toMatchObject({
      version: "2.0.0",
      mandatory: false,
    });
    await publish(operator, release("agent", "2.1.0", { mandatory: true }));
    expect((await check("component=agent&currentVersion=2.0.0&clientId=x")).body.latest).toMatchObject({
      version: "2.1.0",
      mandatory: true,
    });
  });

  it("answers 400 for bad versions, an unknown channel, a bad client id", async () => {
    for (const query of [
      "component=app&currentVersion=1.0",
      "component=app&currentVersion=latest",
      "component=app&currentVersion=1.0.0&channel=nightly",
      "currentVersion=1.0.0",
      "component=app&currentVersion=1.0.0&clientId=a%20b",
    ]) {
      const res = await check(query);
      expect(res.status, query).toBe(400);
    }
  });

  it("stages a release: 10,000 clients at 25 % get 25 % ± 1.5 %, keep their answers, and raising only adds clients", async () => {
    await publish(operator, release("fleet", "1.0.0"));
    const staged = await publish(operator, release("fleet", "1.1.0", { percentage: 25 }));
    expect(staged.body.rollout).toMatchObject({ percentage: 25, effectivePercentage: 25 });
    const ids = Array.from({ length: 10_000 }, (_, i) => `client-${i}`);
    // The bucketing the endpoint uses, for all 10,000 ids; then a sample through HTTP agrees with it.
    const inAt = (pct: number) => new Set(ids.filter((id) => inRollout(id, "fleet", "1.1.0", pct)));
    const at25 = inAt(25);
    expect(at25.size / ids.length).toBeGreaterThanOrEqual(0.235);
    expect(at25.size / ids.length).toBeLessThanOrEqual(0.265);
    const sample = ids.slice(0, 200);
    const answers = await Promise.all(sample.map((id) => check(`component=fleet&currentVersion=1.0.0&clientId=${id}`)));
    for (const [i, res] of answers.entries()) expect(res.body.updateAvailable, sample[i]).toBe(at25.has(sample[i]!));
    // Header instead of query; the same answer.
    const viaHeader = await server.request("/gateway/v1/updates/check?component=fleet&currentVersion=1.0.0", {
      headers: { ...bob, "x-client-id": sample[0]! },
    });
    expect(viaHeader.body.updateAvailable).toBe(at25.has(sample[0]!));
    const raised = await rollout({ component: "fleet", version: "1.1.0", percentage: 60 });
    expect(raised.status).toBe(200);
    const at60 = inAt(60);
    for (const id of at25) expect(at60.has(id)).toBe(true);
    const again = await Promise.all(sample.map((id) => check(`component=fleet&currentVersion=1.0.0&clientId=${id}`)));
    for (const [i, res] of again.entries()) expect(res.body.updateAvailable).toBe(at60.has(sample[i]!));
  });

  it("pauses, resumes, rolls back, and honours startAt", async () => {
    await publish(operator, release("svc", "1.0.0"));
    await publish(operator, release("svc", "2.0.0", { percentage: 100 }));
    const has = async () => (await check("component=svc&currentVersion=1.0.0&clientId=k")).body.updateAvailable;
    expect(await has()).toBe(true);
    expect((await rollout({ component: "svc", version: "2.0.0", state: "paused" })).body).toMatchObject({
      state: "paused",
      percentage: 100,
      effectivePercentage: 0,
    });
    expect(await has()).toBe(false);
    await rollout({ component: "svc", version: "2.0.0", state: "active" });
    expect(await has()).toBe(true);
    await rollout({ component: "svc", version: "2.0.0", state: "rolled_back" });
    expect(await has()).toBe(false);
    await rollout({ component: "svc", version: "2.0.0", state: "active", startAt: new Date(Date.now() + 3_600_000).toISOString() });
    expect(await has()).toBe(false);
    await rollout({ component: "svc", version: "2.0.0", startAt: null });
    expect(await has()).toBe(true);
    const list = await server.request("/gateway/v1/updates/rollouts?component=svc", { headers: bob });
    expect(list.body.data[0]).toMatchObject({ version: "2.0.0", state: "active" });
  });

  it("refuses bad rollouts: percentage outside 0-100, unknown release, wrong channel, non-operators", async () => {
    await publish(operator, release("roll", "1.0.0"));
    for (const percentage of [-1, 101, "fifty"]) {
      const res = await rollout({ component: "roll", version: "1.0.0", percentage });
      expect(res.status, String(percentage)).toBe(400);
      expect(JSON.stringify(res.body)).toMatch(/percentage/);
    }
    const unknown = await rollout({ component: "roll", version: "3.0.0", percentage: 10 });
    expect(unknown.status).toBe(404);
    expect(JSON.stringify(unknown.body)).toMatch(/No release roll 3.0.0/);
    expect((await rollout({ component: "roll", version: "1.0.0", percentage: 10, channel: "beta" })).status).toBe(400);
    expect((await rollout({ component: "roll", version: "1.0.0", percentage: 10 }, alice)).status).toBe(403);
    expect((await rollout({ component: "roll", version: "1.0.0", percentage: 10 }, service)).status).toBe(200);
  });
});
