import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { Page } from "playwright-core";
import { expect } from "vitest";

/**
 * An MCP SDK `OAuthClientProvider` as an application implements one, kept in memory: it
 * registers (dynamically, or by a Client ID Metadata Document URL), keeps its tokens, and hands
 * the authorization URL to the test instead of opening a browser itself.
 */
export class MemoryOAuthProvider implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = "";
  /** The last URL the SDK asked to open in a browser. */
  authorizationUrl: URL | undefined;
  readonly clientMetadataUrl: string | undefined;
  readonly #redirect: string;
  readonly #name: string;

  constructor(redirectUrl: string, options: { name?: string; clientMetadataUrl?: string } = {}) {
    this.#redirect = redirectUrl;
    this.#name = options.name ?? "SDK test client";
    this.clientMetadataUrl = options.clientMetadataUrl;
  }

  get redirectUrl(): string {
    return this.#redirect;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.#name,
      redirect_uris: [this.#redirect],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      application_type: "native",
    } as OAuthClientMetadata;
  }

  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** A loopback redirect URI that keeps the query of each authorization response it receives. */
export interface CallbackServer {
  url: string;
  /** The next authorization response's query (code, state, iss, or error). */
  next(): Promise<URLSearchParams>;
  close(): Promise<void>;
}

export async function callbackServer(path = "/callback"): Promise<CallbackServer> {
  const waiting: ((query: URLSearchParams) => void)[] = [];
  const received: URLSearchParams[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (url.pathname !== path) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>Done</title><p>You may close this window.</p>");
    const resolve = waiting.shift();
    if (resolve) resolve(url.searchParams);
    else received.push(url.searchParams);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    next: () => {
      const ready = received.shift();
      return ready ? Promise.resolve(ready) : new Promise((resolve) => waiting.push(resolve));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface ConsentChoice {
  email: string;
  password: string;
  /** The tenant to choose, by the name shown (default: the first offered). */
  tenantName?: string;
  /** Scopes to untick (mcp:read cannot be). */
  untick?: string[];
  deny?: boolean;
}

const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 20_000, interval: 50 });

/**
 * Drives the consent page as a user would: opens the authorization URL, signs in to the
 * console if the browser has no session (or a session of someone else), chooses the tenant and
 * scopes, and answers. The browser then follows the redirects to the client's redirect URI.
 */
export async function consentInBrowser(page: Page, authorizationUrl: string | URL, choice: ConsentChoice): Promise<void> {
  await page.goto(String(authorizationUrl));
  const signIn = page.getByRole("form", { name: "Sign in" });
  const heading = page.getByRole("heading", { name: /^Authorize / });
  await poll(async () => (await signIn.isVisible()) || (await heading.isVisible()) || (await page.getByRole("alert").isVisible()));
  const who = page.locator(".who strong");
  if ((await heading.isVisible()) && (await who.textContent()) !== choice.email) {
    await page.getByRole("button", { name: "Not you? Sign out" }).click();
    await poll(() => signIn.isVisible());
  }
  if (await signIn.isVisible()) {
    await page.getByLabel("Email").fill(choice.email);
    await page.getByLabel("Password").fill(choice.password);
    await page.getByRole("button", { name: "Sign in" }).click();
  }
  await poll(() => heading.isVisible());
  if (choice.tenantName) {
    const value = await page.locator("#consent-tenant option", { hasText: `${choice.tenantName} (` }).getAttribute("value");
    await page.getByLabel("Tenant").selectOption(value!);
  }
  for (const scope of choice.untick ?? []) await page.locator(`#scope-${scope.replace(":", "\\:")}`).uncheck();
  await page.getByRole("button", { name: choice.deny ? "Deny" : "Authorize" }).click();
}

/** The cookies a browser would keep, by name, with their paths (enough for the authorization server's own). */
export class CookieJar {
  readonly #cookies = new Map<string, { value: string; path: string }>();

  take(headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(";").map((part) => part.trim());
      const [name, ...rest] = pair!.split("=");
      const path = attributes.find((attribute) => attribute.toLowerCase().startsWith("path="))?.slice(5) ?? "/";
      const value = rest.join("=");
      if (!value || attributes.some((attribute) => /^expires=Thu, 01 Jan 1970/i.test(attribute))) this.#cookies.delete(name!);
      else this.#cookies.set(name!, { value, path });
    }
  }

  /** The Cookie header for a request to `path`. */
  headerFor(path: string): string {
    return [...this.#cookies]
      .filter(([, cookie]) => path === cookie.path || path.startsWith(cookie.path.endsWith("/") ? cookie.path : `${cookie.path}/`))
      .map(([name, cookie]) => `${name}=${cookie.value}`)
      .join("; ");
  }
}

/**
 * Follows an authorization over HTTP as a browser would, with `console` the `gw_console=…`
 * cookie of a signed-in user: the authorization request, the consent endpoints the page calls,
 * the confirmation, and the resume, up to the redirect to the client. Returns the redirect's URL.
 */
export async function consentOverHttp(
  origin: string,
  authorizationUrl: string | URL,
  consoleCookie: string,
  decide: (authorization: { uid: string; tenants: { id: string; name: string }[] }) => Record<string, unknown>,
  jar = new CookieJar(),
): Promise<URL> {
  let url = new URL(String(authorizationUrl));
  for (let hop = 0; hop < 10; hop++) {
    if (url.origin !== origin) return url;
    const interaction = /^\/oauth\/interaction\/([\w-]+)$/.exec(url.pathname)?.[1];
    if (interaction) {
      const view = await fetch(`${origin}/api/oauth/authorizations/${interaction}`, { headers: { cookie: consoleCookie } });
      if (view.status !== 200) throw new Error(`consent view: ${view.status} ${await view.text()}`);
      const body = (await view.json()) as { uid: string; tenants: { id: string; name: string }[] };
      const decided = await fetch(`${origin}/api/oauth/authorizations/${interaction}`, {
        method: "POST",
        headers: { cookie: consoleCookie, "content-type": "application/json" },
        body: JSON.stringify(decide(body)),
      });
      if (decided.status !== 200) throw new Error(`consent decision: ${decided.status} ${await decided.text()}`);
      url = new URL(((await decided.json()) as { redirectTo: string }).redirectTo, origin);
      continue;
    }
    const res = await fetch(url, { redirect: "manual", headers: { cookie: jar.headerFor(url.pathname) } });
    jar.take(res.headers);
    const location = res.headers.get("location");
    if (res.status < 300 || res.status >= 400 || !location) throw new Error(`${url.pathname}: ${res.status} ${await res.text()}`);
    url = new URL(location, url);
  }
  throw new Error("too many redirects");
}
