import { createHash, randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { consoleSignIn } from "../helpers/console.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";
import { CookieJar, consentOverHttp } from "../helpers/oauth.js";
import { runAdmin } from "../../scripts/admin-commands.js";

/**
 * The authorization server's protocol rules and the consent page's endpoints over raw HTTP
 * (docs/mcp.md "Authorization server"), on Redis: PKCE S256 and a resource required, redirect
 * URIs checked (loopback rules of RFC 8252), a consent page and its decision reachable by the
 * user who opened it only, a decision applied once and only by the browser that started and
 * answered the request, codes and refresh tokens redeemed once under concurrency, nothing
 * usable stored, and registrations limited per address.
 */

type User = Awaited<ReturnType<typeof registerUser>>;
const REDIRECT = "http://127.0.0.1:7777/callback";
const prefix = uniqueRedisPrefix();
let server: TestServer;
let alice: User;
let bob: User;
let aliceCookie: string;
let bobCookie: string;

beforeAll(async () => {
  server = await startTestServer({ STORAGE: "redis", REDIS_PREFIX: prefix, OAUTH_REGISTRATIONS_PER_HOUR: "8" });
  [alice, bob] = [await registerUser(server), await registerUser(server)];
  aliceCookie = (await consoleSignIn(server, alice.email, alice.password)).pair;
  bobCookie = (await consoleSignIn(server, bob.email, bob.password)).pair;
});
afterAll(async () => {
  await server?.close();
  await dropRedisPrefix(prefix);
});

async function register(metadata: Record<string, unknown> = {}) {
  return fetch(server.url("/oauth/register"), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: "Raw client",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      application_type: "native",
      ...metadata,
    }),
  });
}

let client = "";
const verifier = randomBytes(32).toString("base64url");
const challenge = createHash("sha256").update(verifier).digest("base64url");

function authorizeUrl(overrides: Record<string, string | undefined> = {}) {
  const params: Record<string, string | undefined> = {
    client_id: client,
    redirect_uri: REDIRECT,
    response_type: "code",
    code_challenge: challenge,
    code_challenge_method: "S256",
    resource: server.url("/bridge/mcp"),
    scope: "mcp:read mcp:call",
    state: "st",
    ...overrides,
  };
  const query = new URLSearchParams(Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined));
  return server.url(`/oauth/authorize?${query}`);
}

/** Starts an authorization as a browser: the consent page's uid, and the browser's cookies. */
async function start(overrides: Record<string, string | undefined> = {}) {
  const jar = new CookieJar();
  const res = await fetch(authorizeUrl(overrides), { redirect: "manual" });
  jar.take(res.headers);
  const location = new URL(res.headers.get("location")!, server.origin);
  const uid = /^\/oauth\/interaction\/([\w-]+)$/.exec(location.pathname)?.[1];
  return { res, jar, uid: uid!, location };
}

const view = (uid: string, cookie: string) => server.request(`/api/oauth/authorizations/${uid}`, { headers: { cookie } });
const decide = (uid: string, cookie: string, body: Record<string, unknown>) =>
  server.request(`/api/oauth/authorizations/${uid}`, { method: "POST", headers: { cookie }, json: body });

/** Follows a redirect chain with the jar until it leaves the server; the last Location. */
async function follow(url: string, jar: CookieJar): Promise<{ status: number; location?: URL; text?: string }> {
  let next = new URL(url, server.origin);
  for (let hop = 0; hop < 5; hop++) {
    if (next.origin !== server.origin) return { status: 303, location: next };
    const res = await fetch(next, { redirect: "manual", headers: { cookie: jar.headerFor(next.pathname) } });
    jar.take(res.headers);
    const location = res.headers.get("location");
    if (res.status < 300 || res.status >= 400 || !location) return { status: res.status, text: await res.text() };
    next = new URL(location, next);
  }
  throw new Error("too many redirects");
}

/** A code for Alice, through the whole flow. */
async function code(): Promise<string> {
  const { jar, uid } = await start();
  expect((await view(uid, aliceCookie)).status).toBe(200);
  const decided = await decide(uid, aliceCookie, { approve: true, tenantId: alice.user.tenantId });
  const done = await follow(decided.body.redirectTo, jar);
  return done.location!.searchParams.get("code")!;
}

const exchange = (body: Record<string, string>) =>
  fetch(server.url("/oauth/token"), {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ client_id: client, ...body }),
  });

describe("the authorization endpoint", () => {
  it("registers native clients with loopback redirects and refuses plain http elsewhere", async () => {
    const ok = await register();
    expect(ok.status).toBe(201);
    client = ((await ok.json()) as { client_id: string }).client_id;
    const refused = await register({ redirect_uris: ["http://app.example.com/cb"], application_type: "web" });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: string }).error).toBe("invalid_redirect_uri");
  });

  it("requires PKCE with S256 and a resource of this gateway, and checks the redirect URI exactly (any port on loopback, RFC 8252)", async () => {
    const cases: [Record<string, string | undefined>, string][] = [
      [{ code_challenge: undefined, code_challenge_method: undefined }, "invalid_request"],
      [{ code_challenge_method: "plain", code_challenge: verifier }, "invalid_request"],
      [{ resource: undefined }, "invalid_target"],
      [{ resource: "https://elsewhere.example/bridge/mcp" }, "invalid_target"],
      [{ resource: server.url("/api/v1") }, "invalid_target"],
    ];
    for (const [overrides, error] of cases) {
      const res = await fetch(authorizeUrl(overrides), { redirect: "manual" });
      const location = new URL(res.headers.get("location")!);
      expect(location.origin + location.pathname).toBe(REDIRECT);
      expect(location.searchParams.get("error")).toBe(error);
      // RFC 9207: errors carry the issuer too.
      expect(location.searchParams.get("iss")).toBe(server.origin);
    }
    // An unregistered redirect is never redirected to.
    const foreign = await fetch(authorizeUrl({ redirect_uri: "http://127.0.0.1:7777/elsewhere" }), { redirect: "manual" });
    expect(foreign.status).toBe(400);
    expect(foreign.headers.get("location")).toBeNull();
    // The same loopback path on another port is the same redirect for a native client.
    const otherPort = await start({ redirect_uri: "http://127.0.0.1:9999/callback" });
    expect(otherPort.uid).toBeTruthy();
  });

  it("shows a pending request to the first signed-in user who opens it only: anyone else gets the 404 of a missing one", async () => {
    const { uid } = await start();
    const first = await view(uid, aliceCookie);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      client: { id: client, name: "Raw client", registration: "dynamic", redirectHost: "127.0.0.1:7777", loopbackRedirect: true },
      resource: { url: server.url("/bridge/mcp") },
      scopes: [
        { name: "mcp:read", required: true },
        { name: "mcp:call", required: false },
      ],
      tenants: [{ id: alice.user.tenantId }],
    });
    const foreign = await view(uid, bobCookie);
    const missing = await view("aaaaaaaaaaaaaaaaaaaa", bobCookie);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: { message: missing.body.error.message } });
    const foreignDecision = await decide(uid, bobCookie, { approve: true, tenantId: bob.user.tenantId });
    expect(foreignDecision.status).toBe(404);
    expect(foreignDecision.body.error.message).toBe(missing.body.error.message);
    expect((await view(uid, "")).status).toBe(401);
    // Untouched by Bob: Alice still answers it.
    expect((await decide(uid, aliceCookie, { approve: true, tenantId: alice.user.tenantId })).status).toBe(200);
    expect((await decide(uid, aliceCookie, { approve: true, tenantId: alice.user.tenantId })).status).toBe(409);
    // Bob's tenant is not Alice's to give.
    const other = await start();
    await view(other.uid, aliceCookie);
    const refused = await decide(other.uid, aliceCookie, { approve: true, tenantId: bob.user.tenantId });
    expect(refused.status).toBe(400);
    const unknown = await decide(other.uid, aliceCookie, { approve: true, tenantId: "ten_doesnotexist" });
    expect(unknown.body.error.message).toBe(refused.body.error.message.replace(bob.user.tenantId, "ten_doesnotexist"));
  });

  it("applies a decision once, only in the browser that started the request and answered it", async () => {
    const { jar, uid } = await start();
    await view(uid, aliceCookie);
    const { redirectTo } = (await decide(uid, aliceCookie, { approve: true, tenantId: alice.user.tenantId })).body;
    // Another browser (no interaction cookie) with the link: refused, and the decision is still there.
    const elsewhere = await follow(redirectTo, new CookieJar());
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.text).toContain("started in another browser");
    // The starting browser without the nonce the decision answered with: refused too.
    const guessed = await follow(redirectTo.replace(/nonce=[^&]+/, "nonce=guess"), jar);
    expect(guessed.status).toBe(400);
    const done = await follow(redirectTo, jar);
    expect(done.location!.searchParams.get("code")).toBeTruthy();
    expect(done.location!.searchParams.get("state")).toBe("st");
    expect((await follow(redirectTo, jar)).status).toBe(400);
  });

  it("answers access_denied when the user denies", async () => {
    const { jar, uid } = await start();
    await view(uid, aliceCookie);
    const { redirectTo } = (await decide(uid, aliceCookie, { approve: false })).body;
    const done = await follow(redirectTo, jar);
    expect(done.location!.searchParams.get("error")).toBe("access_denied");
    expect(done.location!.searchParams.get("iss")).toBe(server.origin);
  });
});

describe("the token endpoint", () => {
  it("redeems a code once among concurrent requests, and rotates a refresh token once among concurrent ones", async () => {
    const first = await code();
    const attempts = await Promise.all(
      Array.from({ length: 5 }, () =>
        exchange({ grant_type: "authorization_code", code: first, code_verifier: verifier, redirect_uri: REDIRECT }),
      ),
    );
    expect(attempts.map((res) => res.status).sort()).toEqual([200, 400, 400, 400, 400]);
    const tokens = (await attempts.find((res) => res.status === 200)!.json()) as {
      access_token: string;
      refresh_token: string;
      token_type: string;
    };
    expect(tokens.token_type).toBe("Bearer");
    const refreshes = await Promise.all(
      Array.from({ length: 5 }, () => exchange({ grant_type: "refresh_token", refresh_token: tokens.refresh_token })),
    );
    expect(refreshes.map((res) => res.status).sort()).toEqual([200, 400, 400, 400, 400]);
    // The losers are refused alone: what the winner got still works.
    const won = (await refreshes.find((res) => res.status === 200)!.json()) as { access_token: string; refresh_token: string };
    const listed = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: { authorization: `Bearer ${won.access_token}`, "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(listed.status).toBe(200);
    expect((await exchange({ grant_type: "refresh_token", refresh_token: won.refresh_token })).status).toBe(200);
  });

  it("refuses a code without its PKCE verifier", async () => {
    const res = await exchange({
      grant_type: "authorization_code",
      code: await code(),
      code_verifier: randomBytes(32).toString("base64url"),
      redirect_uri: REDIRECT,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe("invalid_grant");
  });

  it("issues JWT access tokens for the resource, with the tenant and a short life, and stores no usable secret", async () => {
    const the = await code();
    const res = await exchange({
      grant_type: "authorization_code",
      code: the,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      resource: server.url("/bridge/mcp"),
    });
    const tokens = (await res.json()) as { access_token: string; refresh_token: string; expires_in: number; scope: string };
    expect(tokens.expires_in).toBe(600);
    const [header, payload] = tokens.access_token
      .split(".")
      .slice(0, 2)
      .map((part) => JSON.parse(Buffer.from(part, "base64url").toString()));
    expect(header).toMatchObject({ typ: "at+jwt", alg: "ES256" });
    expect(payload).toMatchObject({
      iss: server.origin,
      aud: server.url("/bridge/mcp"),
      sub: alice.user.id,
      client_id: client,
      tenant: alice.user.tenantId,
      scope: "mcp:read mcp:call",
    });
    const jwks = (await server.request("/oauth/jwks")).body as { keys: { kid: string; d?: string }[] };
    expect(jwks.keys.map((key) => key.kid)).toContain(header.kid);
    expect(jwks.keys.every((key) => key.d === undefined)).toBe(true);
    // What Redis holds: neither the refresh token, nor a code, nor a private key in the clear.
    const redis = new Redis(TEST_REDIS_URL);
    try {
      const keys = await redis.keys(`${prefix}:*`);
      const values = (await Promise.all(keys.map((key) => redis.type(key).then((type) => (type === "string" ? redis.get(key) : ""))))).join(
        "\n",
      );
      expect(values).toContain("oauth");
      expect(values).not.toContain(tokens.refresh_token);
      expect(values).not.toContain(the);
      expect(values).not.toMatch(/"d":"/);
      expect(keys.join("\n")).not.toContain(tokens.refresh_token);
    } finally {
      redis.disconnect();
    }
  });

  it("limits registrations per address (OAUTH_REGISTRATIONS_PER_HOUR)", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await register()).status);
    expect(statuses).toContain(429);
    const refused = await register();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("lists consents per user over the Gateway API; another user's consents are neither listed nor revocable", async () => {
    const mine = await server.request("/gateway/v1/oauth/consents", { headers: bearer(alice.token) });
    expect(mine.body.count).toBeGreaterThan(0);
    const theirs = await server.request("/gateway/v1/oauth/consents", { headers: bearer(bob.token) });
    expect(theirs.body).toEqual({ consents: [], count: 0 });
    const id = mine.body.consents[0].id;
    const refused = await server.request(`/gateway/v1/oauth/consents/${id}`, { method: "DELETE", headers: bearer(bob.token) });
    expect(refused.status).toBe(404);
    expect((await server.request("/gateway/v1/oauth/consents", { headers: bearer(alice.token) })).body.count).toBe(mine.body.count);
  });
});

describe("clients an operator registers", () => {
  it("authorize, and a confidential one authenticates at the token endpoint with its secret; removed, it is unknown", async () => {
    const added = (await runAdmin(
      ["add-oauth-client", "--name", "Team portal", "--redirect-uri", "https://portal.example.com/oauth/callback", "--confidential"],
      server.composition,
    )) as { clientId: string; clientSecret: string; confidential: boolean };
    expect(added).toMatchObject({ name: "Team portal", confidential: true, applicationType: "web" });
    expect(added.clientSecret).toBeTruthy();
    const listed = (await runAdmin(["list-oauth-clients"], server.composition)) as { clientId: string; clientSecret?: string }[];
    expect(listed).toEqual([expect.objectContaining({ clientId: added.clientId, name: "Team portal" })]);
    expect(JSON.stringify(listed)).not.toContain(added.clientSecret);
    await expect(
      runAdmin(["add-oauth-client", "--name", "x", "--redirect-uri", "http://portal.example.com/cb"], server.composition),
    ).rejects.toThrow(/redirect URI/);

    const redirect = "https://portal.example.com/oauth/callback";
    const authorize = authorizeUrl({ client_id: added.clientId, redirect_uri: redirect });
    let registration = "";
    const answer = await consentOverHttp(server.origin, authorize, aliceCookie, (view) => {
      registration = (view as unknown as { client: { registration: string } }).client.registration;
      return { approve: true, tenantId: alice.user.tenantId };
    });
    expect(registration).toBe("operator");
    const form = {
      grant_type: "authorization_code",
      code: answer.searchParams.get("code")!,
      code_verifier: verifier,
      redirect_uri: redirect,
    };
    const anonymous = await fetch(server.url("/oauth/token"), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ ...form, client_id: added.clientId }),
    });
    expect(anonymous.status).toBe(401);
    const basic = Buffer.from(`${encodeURIComponent(added.clientId)}:${encodeURIComponent(added.clientSecret)}`).toString("base64");
    // The code was not used up by the refused attempt (client authentication comes first).
    const authenticated = await fetch(server.url("/oauth/token"), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${basic}` },
      body: new URLSearchParams(form),
    });
    expect(authenticated.status).toBe(200);

    await runAdmin(["remove-oauth-client", "--client-id", added.clientId], server.composition);
    const gone = await fetch(authorizeUrl({ client_id: added.clientId, redirect_uri: redirect }), { redirect: "manual" });
    expect(gone.status).toBe(400);
    expect(await gone.text()).toContain("invalid_client");
  });
});
