import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { consoleSignIn } from "../helpers/console.js";
import { callbackServer, consentOverHttp, type CallbackServer } from "../helpers/oauth.js";
import { CLIENTS_DIR, claudeBinary, clientVersion, isolatedEnv, NODE24 } from "../helpers/clients.js";

/**
 * OAUTH_DISCOVERY (docs/mcp.md "Discovery"): off, the metadata documents answer 404 and a 401
 * names neither metadata nor scopes, while tokens already issued keep working; either way a
 * client configured with a valid API key header is never challenged. Claude Code itself (the
 * newest, from test/clients/: `claude mcp add --header` then `claude mcp list`) checks the bridge
 * with a header, with discovery advertised and without; so does the MCP Inspector's CLI (the
 * newest, from test/clients/, on its Node 24), listing the tools and calling one.
 */

const run = promisify(execFile);

/**
 * `claude mcp add --transport http <name> <url> --header …` for each server, then `claude mcp
 * list`, in a fresh home: each server's status line by name.
 */
async function claudeMcpList(servers: Record<string, { url: string; header: string }>): Promise<Record<string, string>> {
  const home = await mkdtemp(join(tmpdir(), "claude-code-"));
  const env = await isolatedEnv(home, { CLAUDE_CONFIG_DIR: join(home, ".claude"), MCP_TIMEOUT: "20000" });
  const claude = claudeBinary();
  try {
    for (const [name, { url, header }] of Object.entries(servers))
      await run(claude, ["mcp", "add", "--transport", "http", name, url, "--header", header], { env, cwd: home });
    const listed = await run(claude, ["mcp", "list"], { env, cwd: home, timeout: 60_000 });
    const lines = listed.stdout.split("\n");
    return Object.fromEntries(
      Object.keys(servers).map((name) => [name, lines.find((line) => line.startsWith(`${name}:`)) ?? listed.stdout]),
    );
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

async function postStatus(server: TestServer, authorization?: string) {
  const res = await fetch(server.url("/bridge/mcp/"), {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", ...(authorization ? { authorization } : {}) },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  return { status: res.status, challenge: res.headers.get("www-authenticate") };
}

interface Deployment {
  server: TestServer;
  user: Awaited<ReturnType<typeof registerUser>>;
  key: string;
}

const deployments: Record<"advertised" | "not-advertised", Deployment> = {} as never;
let callback: CallbackServer;

beforeAll(async () => {
  callback = await callbackServer();
  for (const [name, discovery] of [
    ["advertised", "true"],
    ["not-advertised", "false"],
  ] as const) {
    const server = await startTestServer({ OAUTH_DISCOVERY: discovery });
    const user = await registerUser(server);
    const key = (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(user.token), json: { name: "mcp" } })).body
      .key;
    deployments[name] = { server, user, key };
  }
});
afterAll(async () => {
  await callback?.close();
  for (const deployment of Object.values(deployments)) await deployment.server.close();
});

describe.each(["advertised", "not-advertised"] as const)("discovery %s", (name) => {
  it("publishes the metadata and names it in a 401 only when advertised", async () => {
    const { server, key } = deployments[name];
    const paths = [
      "/.well-known/oauth-protected-resource/bridge/mcp",
      "/.well-known/oauth-protected-resource",
      "/.well-known/oauth-authorization-server",
      "/.well-known/openid-configuration",
    ];
    for (const path of paths) expect((await server.request(path)).status).toBe(name === "advertised" ? 200 : 404);
    const refused = await postStatus(server);
    expect(refused.status).toBe(401);
    if (name === "advertised") expect(refused.challenge).toContain("resource_metadata=");
    else expect(refused.challenge).toBe(`Bearer realm="${server.url("/bridge/mcp")}"`);
    // A valid key is never challenged.
    const keyed = await postStatus(server, `Bearer ${key}`);
    expect(keyed).toEqual({ status: 200, challenge: null });
  });

  it("keeps honouring access tokens it issued", async () => {
    const { server, user } = deployments[name];
    const registered = await server.request("/oauth/register", {
      method: "POST",
      json: {
        client_name: "Configured by hand",
        redirect_uris: [callback.url],
        token_endpoint_auth_method: "none",
        application_type: "native",
      },
    });
    expect(registered.status).toBe(201);
    const verifier = "v".repeat(43);
    const challenge = Buffer.from(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))).toString("base64url");
    const authorize = new URL(server.url("/oauth/authorize"));
    for (const [param, value] of Object.entries({
      client_id: registered.body.client_id,
      redirect_uri: callback.url,
      response_type: "code",
      code_challenge: challenge,
      code_challenge_method: "S256",
      resource: server.url("/bridge/mcp"),
    }))
      authorize.searchParams.set(param, value);
    const cookie = (await consoleSignIn(server, user.email, user.password)).pair;
    const redirect = await consentOverHttp(server.origin, authorize, cookie, () => ({ approve: true, tenantId: user.user.tenantId }));
    const token = await server.request("/oauth/token", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code: redirect.searchParams.get("code")!,
        code_verifier: verifier,
        redirect_uri: callback.url,
        client_id: registered.body.client_id,
      }).toString(),
    });
    expect(token.status).toBe(200);
    expect((await postStatus(server, `Bearer ${token.body.access_token}`)).status).toBe(200);
  });
});

it("Claude Code with a configured Authorization header connects, with discovery advertised and not", async () => {
  const header = (deployment: Deployment) => ({
    url: deployment.server.url("/bridge/mcp/"),
    header: `Authorization: Bearer ${deployment.key}`,
  });
  const listed = await claudeMcpList({
    advertised: header(deployments.advertised),
    "not-advertised": header(deployments["not-advertised"]),
  });
  // Claude Code marks a connected server with a check mark (✓ in older releases, ✔ now).
  expect(listed.advertised).toMatch(/[✓✔] Connected/);
  expect(listed["not-advertised"]).toMatch(/[✓✔] Connected/);
});

/** The MCP Inspector's CLI (`mcp-inspector --cli <url> --header … --method …`) in a fresh home: its JSON answer. */
async function inspector(url: string, header: string, ...args: string[]): Promise<any> {
  const home = await mkdtemp(join(tmpdir(), "mcp-inspector-"));
  const env = await isolatedEnv(home);
  const cli = join(CLIENTS_DIR, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
  try {
    const { stdout } = await run(NODE24, [cli, "--cli", url, "--transport", "http", "--header", header, ...args], {
      env,
      cwd: home,
      timeout: 60_000,
    });
    return JSON.parse(stdout);
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

it(`the MCP Inspector ${clientVersion("@modelcontextprotocol/inspector")} with a static --header lists and calls tools, with discovery advertised and not`, async () => {
  for (const deployment of [deployments.advertised, deployments["not-advertised"]]) {
    const url = deployment.server.url("/bridge/mcp/");
    const header = `Authorization: Bearer ${deployment.key}`;
    const listed = await inspector(url, header, "--method", "tools/list");
    expect(listed.tools.map((tool: { name: string }) => tool.name)).toEqual(expect.arrayContaining(["calculator", "current_time"]));
    const called = await inspector(url, header, "--method", "tools/call", "--tool-name", "calculator", "--tool-arg", "expression=6*7");
    expect(called.isError ?? false).toBe(false);
    expect(JSON.stringify(called.content)).toContain("42");
  }
  // A wrong key is challenged: the Inspector, seeing the advertised authorization server, asks for
  // an interactive OAuth sign-in (which a run without a terminal cannot give) and lists nothing.
  const wrong = inspector(deployments.advertised.server.url("/bridge/mcp/"), "Authorization: Bearer gw_wrong", "--method", "tools/list");
  await expect(wrong).rejects.toThrow(/auth_required/);
});
