import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { consoleSignIn } from "../helpers/console.js";
import { serveScripted, type UpstreamMcp } from "../helpers/upstream.js";
import { callbackServer, consentOverHttp, MemoryOAuthProvider, type CallbackServer } from "../helpers/oauth.js";

/**
 * The bridge as an OAuth resource server (docs/mcp.md "The bridge as a resource server"), with
 * the MCP SDK's own OAuth client and consents answered over HTTP as the console page does
 * (test/bridge/oauth-browser.test.ts drives the page in Chromium): tokens bound to one tenant
 * and one endpoint, refused elsewhere exactly like forged ones, refresh with rotation, RFC 7009
 * revocation, revocation from the console, step-up to mcp:call, and API keys never challenged.
 */

type User = Awaited<ReturnType<typeof registerUser>>;

const whoami = (tenant: string) => ({
  tool: { name: "whoami", description: "which tenant's server answers", inputSchema: { type: "object" as const } },
  run: () => ({ content: [{ type: "text" as const, text: tenant }] }),
});

describe("OAuth access tokens on the MCP endpoints", () => {
  let server: TestServer;
  let alice: User;
  let bob: User;
  let aliceCookie: string;
  let bobCookie: string;
  let teamId: string;
  let personalDocs: UpstreamMcp;
  let teamDocs: UpstreamMcp;
  let callback: CallbackServer;

  beforeAll(async () => {
    server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true", OAUTH_ACCESS_TOKEN_SECONDS: "300" });
    [alice, bob] = [await registerUser(server), await registerUser(server)];
    aliceCookie = (await consoleSignIn(server, alice.email, alice.password)).pair;
    bobCookie = (await consoleSignIn(server, bob.email, bob.password)).pair;
    personalDocs = await serveScripted([whoami("personal")]);
    teamDocs = await serveScripted([whoami("team")]);
    const team = await server.request("/gateway/v1/tenants", {
      method: "POST",
      headers: bearer(alice.token),
      json: { slug: `team-${Date.now()}`, name: "Team" },
    });
    teamId = team.body.id;
    // Both tenants have a server called docs; each token reaches its own tenant's.
    for (const [tenantId, upstream] of [
      [undefined, personalDocs],
      [teamId, teamDocs],
    ] as const) {
      const res = await server.request("/gateway/v1/mcp/servers", {
        method: "POST",
        headers: bearer(alice.token),
        json: { name: "docs", url: upstream.url, ...(tenantId ? { tenantId } : {}) },
      });
      expect(res.status).toBe(201);
    }
    const added = await server.request(`/gateway/v1/tenants/${teamId}/members`, {
      method: "POST",
      headers: bearer(alice.token),
      json: { userId: bob.user.id, role: "member" },
    });
    expect(added.status).toBe(201);
    callback = await callbackServer();
  });
  afterAll(async () => {
    await callback?.close();
    await personalDocs?.close();
    await teamDocs?.close();
    await server?.close();
  });

  /** Runs the SDK's OAuth flow against `path` with `cookie`'s user choosing `tenantId`; the connected client and its provider. */
  async function authorize(path: string, cookie: string, choice: { tenantId: string; scopes?: string[] }) {
    const provider = new MemoryOAuthProvider(callback.url);
    const url = new URL(server.url(path));
    const first = new Client({ name: "oauth-test", version: "1.0.0" });
    await expect(first.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }))).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
    const authorizationUrl = provider.authorizationUrl!;
    expect(authorizationUrl.searchParams.get("resource")).toBe(server.url(path.replace(/\/$/, "")));
    expect(authorizationUrl.searchParams.get("code_challenge_method")).toBe("S256");
    const redirect = await consentOverHttp(server.origin, authorizationUrl, cookie, () => ({ approve: true, ...choice }));
    // RFC 9207: the issuer comes with the code.
    expect(redirect.searchParams.get("iss")).toBe(server.origin);
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    await transport.finishAuth(redirect.searchParams.get("code")!);
    const client = new Client({ name: "oauth-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    return { client, provider };
  }

  async function mcpStatus(path: string, token: string) {
    const res = await fetch(server.url(path), {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    return { status: res.status, challenge: res.headers.get("www-authenticate"), body: await res.text() };
  }

  const text = (result: unknown) => (result as { content: { text: string }[] }).content[0]!.text;

  it("binds a token to the tenant chosen on the consent page, and to one endpoint; elsewhere it is refused like a forged one", async () => {
    const personal = await authorize("/bridge/mcp/", aliceCookie, { tenantId: alice.user.tenantId });
    const names = (await personal.client.listTools()).tools.map((tool) => tool.name);
    expect(names).toContain("docs__whoami");
    expect(text(await personal.client.callTool({ name: "docs__whoami", arguments: {} }))).toBe("personal");

    const team = await authorize("/bridge/mcp/servers/docs", aliceCookie, { tenantId: teamId });
    expect(text(await team.client.callTool({ name: "whoami", arguments: {} }))).toBe("team");

    const personalToken = personal.provider.saved!.access_token;
    const teamToken = team.provider.saved!.access_token;
    const [header, payload, signature] = personalToken.split(".");
    const forged = `${header}.${payload}.${signature!.slice(0, -4)}AAAA`;
    const refusals = [
      await mcpStatus("/bridge/mcp/", teamToken), // a server endpoint's token on the catalog
      await mcpStatus("/bridge/mcp/servers/docs", personalToken), // the catalog's token on a server endpoint
      await mcpStatus("/bridge/mcp/servers/other", teamToken), // one server's token on another
      await mcpStatus("/bridge/mcp/", forged),
    ];
    for (const refusal of refusals) {
      expect(refusal.status).toBe(401);
      expect(refusal.challenge).toContain('error="invalid_token"');
      expect(refusal.challenge).toContain('scope="mcp:read mcp:call"');
    }
    // Word for word the same refusal whatever the reason.
    expect(new Set(refusals.map((refusal) => JSON.parse(refusal.body).error.message)).size).toBe(1);
    // Never accepted on another surface either.
    const elsewhere = await server.request("/gateway/v1/auth/me", { headers: bearer(personalToken) });
    expect(elsewhere.status).toBe(401);
    // The upstream servers never saw an access token of the gateway.
    const seen = [personalDocs, teamDocs]
      .flatMap((upstream) => upstream.requestHeaders.map((headers) => JSON.stringify(headers)))
      .join("\n");
    expect(seen).not.toContain(personalToken);
    expect(seen).not.toContain(teamToken);
    expect(seen).not.toMatch(/authorization/i);
    await personal.client.close();
    await team.client.close();
  });

  it("refuses a token of a tenant its user left, like a forged one", async () => {
    const team = await authorize("/bridge/mcp/", bobCookie, { tenantId: teamId });
    expect(text(await team.client.callTool({ name: "docs__whoami", arguments: {} }))).toBe("team");
    const token = team.provider.saved!.access_token;
    const removed = await server.request(`/gateway/v1/tenants/${teamId}/members/${bob.user.id}`, {
      method: "DELETE",
      headers: bearer(alice.token),
    });
    expect(removed.status).toBe(200);
    const refused = await mcpStatus("/bridge/mcp/", token);
    expect(refused.status).toBe(401);
    expect(refused.challenge).toContain('error="invalid_token"');
    // And the consent page does not offer (nor take) a tenant the user is not in.
    const provider = new MemoryOAuthProvider(callback.url);
    await expect(
      new Client({ name: "x", version: "1" }).connect(
        new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp")), { authProvider: provider }),
      ),
    ).rejects.toBeInstanceOf(UnauthorizedError);
    await expect(
      consentOverHttp(server.origin, provider.authorizationUrl!, bobCookie, (view) => {
        expect(view.tenants.map((tenant) => tenant.id)).toEqual([bob.user.tenantId]);
        return { approve: true, tenantId: teamId };
      }),
    ).rejects.toThrow(/consent decision: 400/);
    await team.client.close().catch(() => undefined);
  });

  it("refreshes an expired access token with a rotated refresh token; a replayed one revokes the consent", async () => {
    const { client, provider } = await authorize("/bridge/mcp/", aliceCookie, { tenantId: alice.user.tenantId });
    const first = { ...provider.saved! };
    expect(first.refresh_token).toBeTruthy();
    expect(first.expires_in).toBe(300);
    // An access token that no longer verifies (as an expired one): the SDK refreshes and retries.
    provider.saved = { ...first, access_token: `${first.access_token.slice(0, -4)}AAAA` };
    expect(text(await client.callTool({ name: "docs__whoami", arguments: {} }))).toBe("personal");
    const second = provider.saved!;
    expect(second.access_token).not.toBe(first.access_token);
    expect(second.refresh_token).not.toBe(first.refresh_token);
    // The first refresh token was used up: presented again later than a concurrent request
    // could (bridge/oauth/adapter.ts: 10 s), it is a replay, refused, and it ends the consent.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 11_000 });
    try {
      const replay = await fetch(server.url("/oauth/token"), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: first.refresh_token!,
          client_id: provider.info!.client_id,
        }),
      });
      expect(replay.status).toBe(400);
      expect(((await replay.json()) as { error: string }).error).toBe("invalid_grant");
      expect((await mcpStatus("/bridge/mcp/", second.access_token)).status).toBe(401);
    } finally {
      vi.useRealTimers();
    }
    await client.close();
  });

  it("revokes through RFC 7009 and through the console; either refuses the access token at once", async () => {
    for (const how of ["rfc7009", "console"] as const) {
      const { client, provider } = await authorize("/bridge/mcp/", aliceCookie, { tenantId: alice.user.tenantId });
      const tokens = provider.saved!;
      expect((await mcpStatus("/bridge/mcp/", tokens.access_token)).status).toBe(200);
      const listed = await server.request("/gateway/v1/oauth/consents", { headers: bearer(alice.token) });
      const consent = listed.body.consents.at(-1);
      expect(consent).toMatchObject({
        client: { name: "SDK test client", registration: "dynamic" },
        tenant: { id: alice.user.tenantId },
        scopes: ["mcp:read", "mcp:call"],
      });
      if (how === "rfc7009") {
        const revoked = await fetch(server.url("/oauth/revoke"), {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            token: tokens.refresh_token!,
            token_type_hint: "refresh_token",
            client_id: provider.info!.client_id,
          }),
        });
        expect(revoked.status).toBe(200);
      } else {
        // Bob cannot see or revoke Alice's consent: the same 404 as a missing one, and it stays.
        const foreign = await server.request(`/api/oauth/consents/${consent.id}`, { method: "DELETE", headers: { cookie: bobCookie } });
        const missing = await server.request("/api/oauth/consents/nosuchconsent", { method: "DELETE", headers: { cookie: bobCookie } });
        expect(foreign.status).toBe(404);
        expect(foreign.body.error.message).toBe(missing.body.error.message);
        expect((await mcpStatus("/bridge/mcp/", tokens.access_token)).status).toBe(200);
        const revoked = await server.request(`/api/oauth/consents/${consent.id}`, { method: "DELETE", headers: { cookie: aliceCookie } });
        expect(revoked.status).toBe(200);
      }
      const refused = await mcpStatus("/bridge/mcp/", tokens.access_token);
      expect(refused.status).toBe(401);
      expect(refused.challenge).toContain('error="invalid_token"');
      const refresh = await fetch(server.url("/oauth/token"), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: tokens.refresh_token!,
          client_id: provider.info!.client_id,
        }),
      });
      expect(refresh.status).toBe(400);
      const after = await server.request("/gateway/v1/oauth/consents", { headers: bearer(alice.token) });
      expect(after.body.consents.map((entry: { id: string }) => entry.id)).not.toContain(consent.id);
      await client.close().catch(() => undefined);
    }
  });

  it("answers a read-only token's tools/call with 403 insufficient_scope, and the SDK steps up", async () => {
    const { client, provider } = await authorize("/bridge/mcp/", aliceCookie, { tenantId: alice.user.tenantId, scopes: ["mcp:read"] });
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    const res = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: { authorization: `Bearer ${provider.saved!.access_token}`, "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "docs__whoami", arguments: {} } }),
    });
    expect(res.status).toBe(403);
    const header = res.headers.get("www-authenticate")!;
    expect(header).toContain('error="insufficient_scope"');
    expect(header).toContain('scope="mcp:read mcp:call"');
    expect(header).toContain(`resource_metadata="${server.origin}/.well-known/oauth-protected-resource/bridge/mcp"`);
    // The SDK answers the 403 with a new authorization asking for the scopes named. SDK 1.x first
    // tries its refresh token, which cannot widen a grant (RFC 6749 §6), and then gives up
    // (modelcontextprotocol/typescript-sdk#2255, fixed in its 2.x transports): a client holding
    // no refresh token shows the step-up as the server drives it.
    provider.saved = { ...provider.saved!, refresh_token: undefined };
    provider.authorizationUrl = undefined;
    await expect(client.callTool({ name: "docs__whoami", arguments: {} })).rejects.toBeInstanceOf(UnauthorizedError);
    expect(provider.authorizationUrl!.searchParams.get("scope")).toContain("mcp:call");
    const redirect = await consentOverHttp(server.origin, provider.authorizationUrl!, aliceCookie, () => ({
      approve: true,
      tenantId: alice.user.tenantId,
    }));
    const transport = new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { authProvider: provider });
    await transport.finishAuth(redirect.searchParams.get("code")!);
    const stepped = new Client({ name: "oauth-test", version: "1.0.0" });
    await stepped.connect(new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { authProvider: provider }));
    expect(text(await stepped.callTool({ name: "docs__whoami", arguments: {} }))).toBe("personal");
    await stepped.close();
    await client.close().catch(() => undefined);
  });

  it("never challenges a request with a valid API key, and challenges one without", async () => {
    const key = await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(alice.token), json: { name: "mcp" } });
    const ok = await mcpStatus("/bridge/mcp/", key.body.key);
    expect(ok.status).toBe(200);
    expect(ok.challenge).toBeNull();
    const none = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${server.origin}/.well-known/oauth-protected-resource/bridge/mcp", scope="mcp:read mcp:call"`,
    );
    const perServer = await fetch(server.url("/bridge/mcp/servers/docs/"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(perServer.headers.get("www-authenticate")).toContain(
      `${server.origin}/.well-known/oauth-protected-resource/bridge/mcp/servers/docs"`,
    );
    const metadata = await server.request("/.well-known/oauth-protected-resource/bridge/mcp/servers/docs");
    expect(metadata.body).toEqual({
      resource: `${server.origin}/bridge/mcp/servers/docs`,
      authorization_servers: [server.origin],
      resource_name: "Tool bridge (MCP): docs",
      bearer_methods_supported: ["header"],
      scopes_supported: ["mcp:read", "mcp:call"],
      resource_documentation: `${server.origin}/docs`,
    });
  });
});
