import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { consoleSignIn } from "../helpers/console.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { rawRedis } from "../helpers/raw-storage.js";
import { eventually } from "../helpers/eventually.js";
import { consentOverHttp } from "../helpers/oauth.js";
import type { ToolsDeps } from "../../rpc/tools/deps.js";

/**
 * An upstream MCP server that needs OAuth (docs/mcp.md "Upstream servers that need OAuth"),
 * here another gateway's bridge with its own authorization server: a member of the tenant
 * connects it in the browser (the gateway as the client, registered dynamically), its tokens
 * are kept sealed per tenant and sent upstream, refreshed when refused, and forgotten (and
 * revoked upstream) on request; another user can neither complete nor see nor drop it.
 */

type User = Awaited<ReturnType<typeof registerUser>>;
const prefix = uniqueRedisPrefix();
let gateway: TestServer;
let upstream: TestServer;
let alice: User;
let eve: User;
let bob: User;
let aliceCookie: string;
let eveCookie: string;
let bobCookie: string;

beforeAll(async () => {
  upstream = await startTestServer();
  gateway = await startTestServer({ STORAGE: "redis", REDIS_PREFIX: prefix, MCP_SERVERS_ALLOW_PRIVATE: "true" });
  [alice, eve] = [await registerUser(gateway), await registerUser(gateway)];
  bob = await registerUser(upstream);
  aliceCookie = (await consoleSignIn(gateway, alice.email, alice.password)).pair;
  eveCookie = (await consoleSignIn(gateway, eve.email, eve.password)).pair;
  bobCookie = (await consoleSignIn(upstream, bob.email, bob.password)).pair;
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
  await dropRedisPrefix(prefix);
});

const call = (token: string, name: string, args: Record<string, unknown>) =>
  gateway.request(`/gateway/v1/mcp/tools/execute?tool=${name}`, { method: "POST", headers: bearer(token), json: { args } });

describe("an upstream server behind OAuth", () => {
  it("is connected through its authorization server in the browser, for the tenant, and used with its token", async () => {
    const registered = await gateway.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: bearer(alice.token),
      json: { name: "remote", url: upstream.url("/bridge/mcp/") },
    });
    expect(registered.status).toBe(201);
    expect(registered.body.health).toBe("unhealthy");
    expect((await gateway.request("/gateway/v1/mcp/servers/remote/oauth", { headers: bearer(alice.token) })).body).toEqual({
      connected: false,
    });

    const started = await gateway.request("/gateway/v1/mcp/servers/remote/oauth", {
      method: "POST",
      headers: bearer(alice.token),
      json: {},
    });
    expect(started.status).toBe(200);
    expect(started.body.registration).toBe("dynamic");
    const authorizationUrl = new URL(started.body.authorizationUrl);
    expect(authorizationUrl.origin + authorizationUrl.pathname).toBe(upstream.url("/oauth/authorize"));
    expect(authorizationUrl.searchParams.get("resource")).toBe(upstream.url("/bridge/mcp"));
    expect(authorizationUrl.searchParams.get("code_challenge_method")).toBe("S256");

    // Bob consents at the upstream's authorization server; his browser comes back to the gateway.
    const back = await consentOverHttp(upstream.origin, authorizationUrl, bobCookie, () => ({
      approve: true,
      tenantId: bob.user.tenantId,
    }));
    expect(back.origin + back.pathname).toBe(gateway.url("/api/mcp/oauth/callback"));
    expect(back.searchParams.get("iss")).toBe(upstream.origin);

    // Another user of the gateway cannot complete it (and leaves it intact); Alice, who started it, does.
    const foreign = await fetch(back, { headers: { cookie: eveCookie } });
    expect(foreign.status).toBe(400);
    expect((await fetch(back)).status).toBe(401);
    const done = await fetch(back, { headers: { cookie: aliceCookie } });
    expect(done.status).toBe(200);
    expect(done.headers.get("content-type")).toContain("text/html");
    expect(await done.text()).toContain("remote is connected");
    expect((await fetch(back, { headers: { cookie: aliceCookie } })).status).toBe(400);

    await eventually(async () => (await call(alice.token, "remote__calculator", { expression: "6 * 7" })).status === 200, 10_000);
    const result = await call(alice.token, "remote__calculator", { expression: "6 * 7" });
    expect(JSON.stringify(result.body)).toContain("42");
    const status = await gateway.request("/gateway/v1/mcp/servers/remote/oauth", { headers: bearer(alice.token) });
    expect(status.body).toMatchObject({ connected: true, issuer: upstream.origin, registration: "dynamic", connectedBy: alice.user.id });
    // The upstream knows the gateway as a client Bob authorized.
    const consents = await upstream.request("/gateway/v1/oauth/consents", { headers: bearer(bob.token) });
    expect(consents.body.consents).toEqual([
      expect.objectContaining({ client: expect.objectContaining({ name: "Chat, agent and tool gateway" }) }),
    ]);
    // Sealed at rest: no token of the upstream in the gateway's Redis.
    const deps = gateway.composition.deps<ToolsDeps>("tools");
    const stored = (await deps.upstreamOAuth.get(alice.user.tenantId, "remote"))!;
    const raw = await rawRedis(prefix);
    expect(raw).toContain("upstream-oauth");
    expect(raw).not.toContain(stored.tokens.access_token);
    expect(raw).not.toContain(stored.tokens.refresh_token!);
  });

  it("is for the tenant only: another user's calls see no such server", async () => {
    for (const [method, path] of [
      ["GET", "/gateway/v1/mcp/servers/remote/oauth"],
      ["POST", "/gateway/v1/mcp/servers/remote/oauth"],
      ["DELETE", "/gateway/v1/mcp/servers/remote/oauth"],
    ] as const) {
      const foreign = await gateway.request(path, { method, headers: bearer(eve.token), ...(method === "POST" ? { json: {} } : {}) });
      const missing = await gateway.request(path.replace("remote", "nosuch"), {
        method,
        headers: bearer(eve.token),
        ...(method === "POST" ? { json: {} } : {}),
      });
      expect(foreign.status).toBe(404);
      expect(foreign.body.error.message).toBe(missing.body.error.message);
    }
    expect((await call(eve.token, "remote__calculator", { expression: "1" })).status).toBe(404);
    expect((await gateway.request("/gateway/v1/mcp/servers/remote/oauth", { headers: bearer(alice.token) })).body.connected).toBe(true);
  });

  it("refreshes the token when the upstream refuses it, on its own", async () => {
    const deps = gateway.composition.deps<ToolsDeps>("tools");
    const stored = (await deps.upstreamOAuth.get(alice.user.tenantId, "remote"))!;
    // As if expired: the upstream refuses it; the gateway refreshes and reconnects.
    await deps.upstreamOAuth.put(alice.user.tenantId, "remote", {
      ...stored,
      tokens: { ...stored.tokens, access_token: `${stored.tokens.access_token.slice(0, -4)}AAAA` },
    });
    await deps.upstreamOAuth.announce({ tenantId: alice.user.tenantId, server: "remote" });
    await eventually(async () => (await deps.upstreamOAuth.get(alice.user.tenantId, "remote"))?.refreshedAt !== undefined, 15_000);
    await eventually(async () => (await call(alice.token, "remote__calculator", { expression: "2 + 2" })).status === 200, 10_000);
    const refreshed = (await deps.upstreamOAuth.get(alice.user.tenantId, "remote"))!;
    expect(refreshed.tokens.refresh_token).not.toBe(stored.tokens.refresh_token);
  });

  it("is forgotten on request, and revoked at the upstream's authorization server", async () => {
    const dropped = await gateway.request("/gateway/v1/mcp/servers/remote/oauth", { method: "DELETE", headers: bearer(alice.token) });
    expect(dropped.body).toEqual({ success: true, name: "remote" });
    expect((await gateway.request("/gateway/v1/mcp/servers/remote/oauth", { headers: bearer(alice.token) })).body).toEqual({
      connected: false,
    });
    await eventually(
      async () => (await upstream.request("/gateway/v1/oauth/consents", { headers: bearer(bob.token) })).body.count === 0,
      10_000,
    );
    await eventually(async () => (await call(alice.token, "remote__calculator", { expression: "1" })).status !== 200, 10_000);
  });
});
