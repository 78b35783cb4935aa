import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { http, HttpResponse } from "msw";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";

/**
 * docs/billing.md "Proxy": only the identity the gateway sets reaches the manager. Before,
 * X-Tenant-Id, X-User-Id, X-Forwarded-For and ?tenantId= went through unchanged.
 */
const MANAGER = "http://manager.billing.test/api";
const SECRET = "service-jwt-secret-of-at-least-32-characters!";
const G = "/gateway/v1";

let seen: { url: URL; headers: Headers }[] = [];
const msw = mockUpstreams(
  http.all(`${MANAGER}/*`, ({ request }) => {
    seen.push({ url: new URL(request.url), headers: request.headers });
    return HttpResponse.json({ ok: true });
  }),
);

let server: TestServer;
let alice: Awaited<ReturnType<typeof registerUser>>;
let bob: Awaited<ReturnType<typeof registerUser>>;
let aliceShared: string;
let bobShared: string;

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({ MANAGER_BASE_URL: msw.url(MANAGER), SERVICE_JWT_SECRET: SECRET });
  alice = await registerUser(server);
  bob = await registerUser(server);
  const a = await server.request(`${G}/tenants`, { method: "POST", headers: bearer(alice.token), json: { slug: `al-${Date.now()}`, name: "A" } });
  const b = await server.request(`${G}/tenants`, { method: "POST", headers: bearer(bob.token), json: { slug: `bo-${Date.now()}`, name: "B" } });
  aliceShared = a.body.id;
  bobShared = b.body.id;
}, 30_000);
afterEach(() => {
  seen = [];
});
afterAll(async () => {
  await server?.close();
  await msw.close();
});

describe("billing proxy identity", () => {
  it("strips client-sent identity and X-Forwarded-* headers; only the gateway's X-Gateway-* say who calls", async () => {
    const forged = {
      "x-tenant-id": bobShared,
      "x-user-id": bob.user.id,
      "x-workspace-id": bob.user.workspaceId,
      "x-forwarded-for": "10.0.0.1",
      "x-forwarded-host": "admin.internal",
      "x-forwarded-proto": "https",
      forwarded: "for=10.0.0.1",
      "x-real-ip": "10.0.0.2",
      "x-client-ip": "10.0.0.3",
      "true-client-ip": "10.0.0.4",
      "x-auth-user": "root",
      "x-user_id": "root",
      "remote-user": "root",
      "x-gateway-tenant-id": bobShared,
      "x-custom": "kept",
    };
    const res = await fetch(server.url(`${G}/billing/invoices`), { headers: { ...bearer(alice.token), ...forged } });
    expect(res.status).toBe(200);
    expect(seen).toHaveLength(1);
    const got = seen[0]!.headers;
    // (The msw bridge of the test helpers sets its own X-Forwarded-Proto, `http`.)
    for (const name of Object.keys(forged).filter((name) => !["x-custom", "x-gateway-tenant-id", "x-forwarded-proto"].includes(name))) expect(got.get(name), name).toBeNull();
    expect(got.get("x-forwarded-proto")).toBe("http");
    expect(got.get("x-custom")).toBe("kept");
    expect(got.get("x-gateway-user-id")).toBe(alice.user.id);
    expect(got.get("x-gateway-tenant-id")).toBe(alice.user.tenantId);
    expect(got.get("x-gateway-workspace-id")).toBe(alice.user.workspaceId);
  });

  it("checks tenantId in the query against the caller's memberships: another tenant's is the same 404 as a missing one, never forwarded", async () => {
    const own = await fetch(server.url(`${G}/billing/invoices?tenantId=${aliceShared}`), { headers: bearer(alice.token) });
    expect(own.status).toBe(200);
    expect(seen.at(-1)!.headers.get("x-gateway-tenant-id")).toBe(aliceShared);
    expect(seen.at(-1)!.url.searchParams.get("tenantId")).toBe(aliceShared);

    const before = seen.length;
    for (const query of [`tenantId=${bobShared}`, `tenant_id=${bobShared}`, `tenant=${bobShared}`, `tenantId=${aliceShared}&tenantId=${bobShared}`, `tenantId=ten_missing`]) {
      const res = await server.request(`${G}/billing/invoices?${query}`, { headers: bearer(alice.token) });
      expect(res.status, query).toBe(404);
      expect(res.body.error.code, query).toBe("NOT_FOUND");
      expect(res.body.error.message, query).toMatch(/^Tenant not found: /);
    }
    // POST too: nothing reached the manager.
    const post = await server.request(`${G}/billing/checkout?tenantId=${bobShared}`, { method: "POST", headers: bearer(alice.token), json: { plan: "pro" } });
    expect(post.status).toBe(404);
    expect(seen.length).toBe(before);

    // Bob reaches his own tenant the same way.
    const bobs = await fetch(server.url(`${G}/billing/invoices?tenantId=${bobShared}`), { headers: bearer(bob.token) });
    expect(bobs.status).toBe(200);
    expect(seen.at(-1)!.headers.get("x-gateway-tenant-id")).toBe(bobShared);
  });
});
