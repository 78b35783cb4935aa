import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { consoleSignIn, withCookie, type ConsoleCookie } from "../../helpers/console.js";
import { buildConsole } from "../../../scripts/build-console.mjs";
import { connectVm, vmSocketUrl } from "../../helpers/vm.js";

type User = Awaited<ReturnType<typeof registerUser>>;

describe("The console page and the endpoints it calls (docs/console.md)", () => {
  let server: TestServer;
  let alice: User;
  let bob: User;
  let aliceCookie: ConsoleCookie;
  let bobCookie: ConsoleCookie;

  beforeAll(async () => {
    await buildConsole();
    server = await startTestServer();
    [alice, bob] = await Promise.all([registerUser(server), registerUser(server)]);
    [aliceCookie, bobCookie] = await Promise.all([
      consoleSignIn(server, alice.email, alice.password),
      consoleSignIn(server, bob.email, bob.password),
    ]);
  });
  afterAll(async () => {
    await server.close();
  });

  describe("the page", () => {
    it("serves /console with a strict CSP, no framing and no referrer", async () => {
      const res = await fetch(server.url("/console"));
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/html/);
      const csp = res.headers.get("content-security-policy")!;
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("style-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain("unsafe-inline");
      expect(res.headers.get("x-frame-options")).toBe("DENY");
      expect(res.headers.get("referrer-policy")).toBe("no-referrer");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      const html = await res.text();
      // No inline script or style: every <script> has a src, no <style> element, no style attribute.
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
      expect(html).not.toMatch(/<style|style=/);
      // Nothing from another origin.
      expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    });

    it("serves the bundle with the same headers, revalidated by ETag; other names are 404", async () => {
      const js = await fetch(server.url("/console/assets/app.js"));
      expect(js.status).toBe(200);
      expect(js.headers.get("content-type")).toMatch(/^text\/javascript/);
      expect(js.headers.get("x-frame-options")).toBe("DENY");
      const etag = js.headers.get("etag")!;
      const jsBody = Buffer.from(await js.arrayBuffer());
      expect(jsBody.byteLength).toBeGreaterThan(1000);
      const again = await fetch(server.url("/console/assets/app.js"), { headers: { "if-none-match": etag } });
      expect(again.status).toBe(304);
      // Sent gzipped to a browser that accepts it (fetch decompresses it), as it is to anyone else.
      const raw = await fetch(server.url("/console/assets/app.js"), { headers: { "accept-encoding": "identity" } });
      expect(raw.headers.get("content-encoding")).toBeNull();
      expect(js.headers.get("content-encoding")).toBe("gzip");
      expect(js.headers.get("vary")).toBe("accept-encoding");
      expect(Buffer.from(await raw.arrayBuffer()).equals(jsBody)).toBe(true);
      const refused = await fetch(server.url("/console/assets/app.js"), { headers: { "accept-encoding": "gzip;q=0, identity" } });
      expect(refused.headers.get("content-encoding")).toBeNull();
      await refused.arrayBuffer();
      const css = await fetch(server.url("/console/assets/app.css"));
      expect(css.headers.get("content-type")).toMatch(/^text\/css/);
      for (const name of ["../package.json", "app.js.map", "x.js", "%2e%2e%2fpackage.json"]) {
        expect((await fetch(server.url(`/console/assets/${name}`))).status).not.toBe(200);
      }
    });
  });

  describe("cross-site requests with the cookie", () => {
    const create = (headers: Record<string, string>, body: string, type = "application/json") =>
      fetch(server.url("/api/api-keys"), {
        method: "POST",
        headers: { ...withCookie(aliceCookie), "content-type": type, ...headers },
        body,
      });
    const keyCount = async () => (await server.request("/api/api-keys", { headers: withCookie(aliceCookie) })).body.data.length as number;

    it("refuses a form POST from another loopback port (same site, other origin) with 403 before anything runs", async () => {
      const before = await keyCount();
      const res = await create(
        { origin: "http://127.0.0.1:1", "sec-fetch-site": "same-site" },
        "name=evil",
        "application/x-www-form-urlencoded",
      );
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual({ error: { message: "Cross-site request refused: Origin http://127.0.0.1:1 is not this service" } });
      const json = await create({ origin: "https://evil.example" }, JSON.stringify({ name: "evil" }));
      expect(json.status).toBe(403);
      expect(await keyCount()).toBe(before);
    });

    it("refuses a write a browser marks cross-site or same-site even without Origin, and an opaque Origin", async () => {
      expect((await create({ "sec-fetch-site": "cross-site" }, JSON.stringify({ name: "x" }))).status).toBe(403);
      expect((await create({ "sec-fetch-site": "same-site" }, JSON.stringify({ name: "x" }))).status).toBe(403);
      expect((await create({ origin: "null" }, JSON.stringify({ name: "x" }))).status).toBe(403);
      const signOut = await fetch(server.url("/api/session"), {
        method: "DELETE",
        headers: { ...withCookie(aliceCookie), origin: "http://localhost:9" },
      });
      expect(signOut.status).toBe(403);
      expect((await server.request("/api/session", { headers: withCookie(aliceCookie) })).status).toBe(200);
    });

    it("lets the page's own origin, and clients that send neither header, write", async () => {
      const own = await create({ origin: server.origin, "sec-fetch-site": "same-origin" }, JSON.stringify({ name: "from the page" }));
      expect(own.status).toBe(201);
      const curl = await create({}, JSON.stringify({ name: "from curl" }));
      expect(curl.status).toBe(201);
      // Reads are not state-changing: a foreign Origin still gets CORS-less JSON it cannot read in a browser.
      const read = await fetch(server.url("/api/api-keys"), { headers: { ...withCookie(aliceCookie), origin: "http://127.0.0.1:1" } });
      expect(read.status).toBe(200);
      expect(read.headers.get("access-control-allow-origin")).toBeNull();
    });

    it("leaves the Platform API and the Gateway alone (they take no cookie)", async () => {
      const res = await fetch(server.url("/gateway/v1/auth/keys"), {
        method: "POST",
        headers: { ...bearer(alice.token), origin: "http://127.0.0.1:1", "content-type": "application/json" },
        body: JSON.stringify({ name: "k" }),
      });
      expect(res.status).toBe(201);
    });
  });

  describe("Gateway reads bound on the console surface", () => {
    const READS = [
      "/api/workspaces",
      "/api/billing/usage",
      "/api/usage/daily",
      "/api/usage/models",
      "/api/gateway-keys",
      "/api/personal-keys",
      "/api/agents",
      "/api/mcp/servers",
      "/api/vms",
    ];

    it("answer the cookie session, and 'Not signed in' in the console envelope without it", async () => {
      for (const path of READS) {
        const signedIn = await server.request(path, { headers: withCookie(aliceCookie) });
        expect(signedIn.status, path).toBe(200);
        const anonymous = await server.request(path);
        expect(anonymous.status, path).toBe(401);
        expect(anonymous.body, path).toEqual({ error: { message: "Not signed in" } });
        // A bearer token is not read on the console surface.
        expect((await server.request(path, { headers: bearer(alice.token) })).status, path).toBe(401);
      }
    });

    it("show each user their own workspaces, keys and usage only", async () => {
      const workspaces = await server.request("/api/workspaces", { headers: withCookie(aliceCookie) });
      expect(workspaces.body.workspaces.map((entry: { id: string }) => entry.id)).toEqual([alice.user.workspaceId]);
      expect(workspaces.body.workspaces[0]).toMatchObject({ creditBalance: 0 });
      await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(bob.token), json: { name: "bob gateway" } });
      const aliceGateway = await server.request("/api/gateway-keys", { headers: withCookie(aliceCookie) });
      expect(aliceGateway.body.map((key: { name: string }) => key.name)).not.toContain("bob gateway");
      const bobGateway = await server.request("/api/gateway-keys", { headers: withCookie(bobCookie) });
      expect(bobGateway.body.map((key: { name: string }) => key.name)).toEqual(["bob gateway"]);
      expect(JSON.stringify(bobGateway.body)).not.toMatch(/sk_[A-Za-z0-9]{20}/);
      const usage = await server.request(`/api/usage/daily?tenantId=${bob.user.tenantId}`, { headers: withCookie(aliceCookie) });
      const missing = await server.request("/api/usage/daily?tenantId=tnt_missing", { headers: withCookie(aliceCookie) });
      expect(usage.status).toBe(404);
      expect(usage.body.error.message.replace(bob.user.tenantId, "X")).toBe(missing.body.error.message.replace("tnt_missing", "X"));
    });

    it("list a tenant's connected VMs to its members only, on the Gateway and the console alike", async () => {
      const vm = await connectVm(vmSocketUrl(server.origin, "agent-b", { vmId: "bob-box" }), bob.token);
      try {
        await vm.register([{ name: "build" }]);
        const mine = await server.request("/api/vms", { headers: withCookie(bobCookie) });
        expect(mine.body).toEqual({
          vms: [expect.objectContaining({ vmId: "bob-box", agentId: "agent-b", tenantId: bob.user.tenantId, tools: 1 })],
          count: 1,
        });
        expect((await server.request("/gateway/v1/vms", { headers: bearer(bob.token) })).body.count).toBe(1);
        expect((await server.request("/api/vms", { headers: withCookie(aliceCookie) })).body).toEqual({ vms: [], count: 0 });
        expect((await server.request("/gateway/v1/vms", { headers: bearer(alice.token) })).body.count).toBe(0);
      } finally {
        await vm.close();
      }
    });

    it("console key calls take another workspace only when the user is a member: another's is the same 404 as a missing one", async () => {
      const list = (workspaceId: string) =>
        server.request(`/api/api-keys?workspaceId=${workspaceId}`, { headers: withCookie(aliceCookie) });
      expect((await list(alice.user.workspaceId)).status).toBe(200);
      const other = await list(bob.user.workspaceId);
      const missing = await list("ws_missing");
      expect(other.status).toBe(404);
      expect(missing.status).toBe(404);
      const created = await server.request("/api/api-keys", {
        method: "POST",
        headers: withCookie(aliceCookie),
        json: { name: "into bob", workspaceId: bob.user.workspaceId },
      });
      expect(created.status).toBe(404);
      expect((await server.request("/api/api-keys", { headers: withCookie(bobCookie) })).body.data).toEqual([]);
    });
  });

  describe("gateway and personal keys through the cookie", () => {
    it("are created with the secret once, listed without it, and revoked; another user's is the same 404 as a missing one", async () => {
      for (const [path, prefix] of [
        ["/api/gateway-keys", /^sk_/],
        ["/api/personal-keys", /^acct_/],
      ] as const) {
        const created = await server.request(path, {
          method: "POST",
          headers: withCookie(aliceCookie),
          json: { name: "from the console" },
        });
        expect(created.status, path).toBe(201);
        expect(created.body.key).toMatch(prefix);
        const listed = await server.request(path, { headers: withCookie(aliceCookie) });
        expect(JSON.stringify(listed.body)).not.toContain(created.body.key);
        const byBob = await server.request(`${path}/${created.body.id}`, { method: "DELETE", headers: withCookie(bobCookie) });
        const missing = await server.request(`${path}/key_missing`, { method: "DELETE", headers: withCookie(bobCookie) });
        expect(byBob.status, path).toBe(404);
        expect(byBob.body).toEqual(missing.body);
        const revoked = await server.request(`${path}/${created.body.id}`, { method: "DELETE", headers: withCookie(aliceCookie) });
        expect(revoked.status, path).toBe(200);
        // A key is never a console credential: with no cookie, "Not signed in".
        const withKey = await server.request(path, {
          method: "POST",
          headers: bearer(created.body.key),
          json: { name: "minted by a key" },
        });
        expect(withKey.status, path).toBe(401);
      }
      expect(server.rawLogs.join("\n")).not.toMatch(/"key":"(sk_|acct_)/);
    });
  });

  describe("operators", () => {
    it("see balances and grant credits; anyone else gets 403 and no credits move", async () => {
      const session = await server.request("/api/session", { headers: withCookie(aliceCookie) });
      expect(session.body.operator).toBe(false);
      const refused = await server.request("/api/operator/credits", {
        method: "POST",
        headers: withCookie(aliceCookie),
        json: { workspaceId: alice.user.workspaceId, credits: 5 },
      });
      expect(refused.status).toBe(403);
      expect(
        (await server.request(`/api/operator/balances?email=${encodeURIComponent(bob.email)}`, { headers: withCookie(aliceCookie) }))
          .status,
      ).toBe(403);
      expect(await server.composition.ports.repos.credits.balance(alice.user.workspaceId)).toBe(0);

      const record = (await server.composition.ports.repos.users.get(alice.user.id))!;
      await server.composition.ports.repos.users.put({ ...record, operator: true });
      expect((await server.request("/api/session", { headers: withCookie(aliceCookie) })).body.operator).toBe(true);
      const balances = await server.request(`/api/operator/balances?email=${encodeURIComponent(bob.email)}`, {
        headers: withCookie(aliceCookie),
      });
      expect(balances.status).toBe(200);
      expect(balances.body.workspaces).toEqual([expect.objectContaining({ workspaceId: bob.user.workspaceId, creditBalance: 0 })]);
      const granted = await server.request("/api/operator/credits", {
        method: "POST",
        headers: withCookie(aliceCookie),
        json: { workspaceId: bob.user.workspaceId, credits: 2.5 },
      });
      expect(granted.status).toBe(200);
      expect(granted.body).toMatchObject({ workspaceId: bob.user.workspaceId, granted: 2_500_000, creditBalance: 2_500_000 });
      expect(await server.composition.ports.repos.credits.balance(bob.user.workspaceId)).toBe(2_500_000);

      const negative = await server.request("/api/operator/credits", {
        method: "POST",
        headers: withCookie(aliceCookie),
        json: { workspaceId: bob.user.workspaceId, credits: -1 },
      });
      expect(negative.status).toBe(400);
      expect(negative.body.error.message).toMatch(/credits must be positive/);
      const unknown = await server.request("/api/operator/credits", {
        method: "POST",
        headers: withCookie(aliceCookie),
        json: { workspaceId: "ws_missing", credits: 1 },
      });
      expect(unknown.status).toBe(404);
      // Without email or workspaceId: every workspace with its balance, a page at a time.
      const everyone: Array<{ workspaceId: string; creditBalance: number }> = [];
      let after: string | undefined;
      for (let pages = 0; pages < 100; pages++) {
        const page = await server.request(`/api/operator/balances?limit=1${after ? `&after=${after}` : ""}`, {
          headers: withCookie(aliceCookie),
        });
        expect(page.status).toBe(200);
        expect(page.body.workspaces.length).toBeLessThanOrEqual(1);
        everyone.push(...page.body.workspaces);
        after = page.body.nextAfter;
        if (!after) break;
      }
      expect(everyone.map((entry) => entry.workspaceId)).toEqual(expect.arrayContaining([alice.user.workspaceId, bob.user.workspaceId]));
      expect(new Set(everyone.map((entry) => entry.workspaceId)).size).toBe(everyone.length);
      expect(everyone.find((entry) => entry.workspaceId === bob.user.workspaceId)!.creditBalance).toBe(2_500_000);
      const both = await server.request(
        `/api/operator/balances?email=${encodeURIComponent(bob.email)}&workspaceId=${bob.user.workspaceId}`,
        { headers: withCookie(aliceCookie) },
      );
      expect(both.status).toBe(400);
      expect(both.body.error.message).toMatch(/not both/);
      expect((await server.request("/api/operator/balances?limit=0", { headers: withCookie(aliceCookie) })).status).toBe(400);
      expect((await server.request("/api/operator/balances", { headers: withCookie(bobCookie) })).status).toBe(403);
      // The same methods on the Gateway take the operator's session token.
      const gateway = await server.request(`/gateway/v1/operator/balances?workspaceId=${bob.user.workspaceId}`, {
        headers: bearer(alice.token),
      });
      expect(gateway.body.workspaces[0].creditBalance).toBe(2_500_000);
    });
  });
});
