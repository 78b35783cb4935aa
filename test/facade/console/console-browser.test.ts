import { createServer, type Server } from "node:http";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import OpenAI from "openai";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { openaiClient, userMessage } from "../../helpers/chat.js";
import { launchBrowser, type TestBrowser } from "../../helpers/browser.js";
import { serveScripted } from "../../helpers/upstream.js";
import { connectVm, vmSocketUrl, type TestVm } from "../../helpers/vm.js";

/**
 * The console driven in Chromium as a user would (docs/console.md). With CONSOLE_SCREENSHOTS
 * set (npm run screenshots:console), the main screens are saved under docs/console/.
 */
const SHOTS = process.env.CONSOLE_SCREENSHOTS ? join(import.meta.dirname, "..", "..", "..", "docs", "console") : undefined;

/** Waits for the page (a sign-in hashes a password: seconds on a busy machine). */
const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000, interval: 50 });

async function shot(page: Page, name: string) {
  if (!SHOTS) return;
  await mkdir(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

describe("The console in a real browser", () => {
  let server: TestServer;
  let browser: TestBrowser;
  let page: Page;
  let user: Awaited<ReturnType<typeof registerUser>>;
  let attacker: Server;
  let upstream: Awaited<ReturnType<typeof serveScripted>>;
  let vm: TestVm;
  let secret = "";
  /** Script errors and CSP refusals the page met (a 4xx answer's "Failed to load resource" is not one). */
  const pageErrors: string[] = [];

  beforeAll(async () => {
    server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true" });
    user = await registerUser(server, { fullName: "Ada Example" });
    // The page's own operator tab grants the credits below.
    await server.composition.ports.repos.users.put({ ...(await server.composition.ports.repos.users.get(user.user.id))!, operator: true });
    browser = await launchBrowser();
    await browser.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.origin });
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.on("pageerror", (error) => pageErrors.push(error.message));
    page.on("console", (message) => {
      if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) pageErrors.push(message.text());
    });
  });
  afterAll(async () => {
    await browser?.close();
    await vm?.close();
    await upstream?.close();
    attacker?.close();
    await server?.close();
  });

  const client = () => openaiClient(server, "/api/v1", secret);
  const chat = () => client().chat.completions.create({ model: "echo-1", messages: userMessage("hello from the console test") });
  const keyRow = (name: string) => page.locator("#key-table tbody tr", { has: page.getByRole("rowheader", { name }) });

  it("signs in with the cookie session", async () => {
    await page.goto(server.url("/console"));
    await poll(() => page.getByRole("heading", { name: "Gateway console" }).isVisible()).toBe(true);
    await shot(page, "sign-in");
    await page.getByLabel("Email").fill(user.email);
    await page.getByLabel("Password").fill("wrong password 1A");
    await page.getByRole("button", { name: "Sign in" }).click();
    await poll(() => page.locator("form [role=alert]").textContent()).toMatch(/invalid|incorrect/i);
    await page.getByLabel("Password").fill(user.password);
    // Keyboard: Enter submits the labelled form.
    await page.getByLabel("Password").press("Enter");
    await poll(() => page.getByText(user.email).isVisible()).toBe(true);
    await poll(() => page.locator("#no-keys").isVisible()).toBe(true);
    const cookies = await browser.context.cookies(`${server.origin}/api`);
    expect(cookies.find((cookie) => cookie.name === "gw_console")).toMatchObject({ httpOnly: true, sameSite: "Lax" });
  });

  it("grants credits from the operator tab and shows the balance", async () => {
    await poll(() => page.locator("#balance").textContent()).toBe("0");
    await page.getByRole("button", { name: "Operator" }).click();
    // The tab opens on every workspace's balance.
    await poll(() => page.getByRole("table", { name: "Workspace balances" }).getByText(user.user.workspaceId).isVisible()).toBe(true);
    await page.getByLabel("User email or workspace id").fill(user.email);
    await page.getByRole("button", { name: "Look up" }).click();
    await poll(() => page.getByLabel("Workspace id", { exact: true }).inputValue()).toBe(user.user.workspaceId);
    await page.getByLabel("Credits to grant").fill("50");
    await page.getByRole("button", { name: "Grant credits" }).click();
    await poll(() => page.getByText(/Granted 50 credits/).isVisible()).toBe(true);
    await poll(() => page.locator("#balance").textContent()).toBe("50");
    await shot(page, "operator");
  });

  it("creates a key, shows its secret once with a copy button, and the key works with the openai client", async () => {
    await page.getByRole("button", { name: "API keys" }).click();
    await page.getByLabel("Key name").fill("browser key");
    await page.getByLabel("Key name").press("Enter");
    await poll(() => page.getByText("you will not see it again").isVisible()).toBe(true);
    const shown = await page.getByLabel("Your new API key").inputValue();
    expect(shown).toMatch(/^sk-gateway-/);
    await page.getByRole("button", { name: "Copy" }).click();
    await poll(() => page.getByText("Copied to the clipboard.").isVisible()).toBe(true);
    secret = (await page.evaluate("navigator.clipboard.readText()")) as string;
    expect(secret).toBe(shown);
    await shot(page, "key-created");

    const completion = await chat();
    expect(completion.choices[0]!.message.content).toContain("hello from the console test");

    // Never in the URL nor in storage; gone from the page once dismissed, and after a reload.
    expect(page.url()).not.toContain(secret);
    expect(await page.evaluate("JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })")).toBe("{}{}");
    await page.getByRole("button", { name: "I have stored it" }).click();
    expect(await page.content()).not.toContain(secret);
    await page.reload();
    await poll(() => keyRow("browser key").isVisible()).toBe(true);
    expect(await page.content()).not.toContain(secret);
    expect(server.rawLogs.join("\n")).not.toContain(secret);
  });

  it("shows the API's validation message, sets an rpm limit, and the second request in the minute gets 429", async () => {
    await page.getByRole("button", { name: "Edit browser key" }).click();
    await page.getByLabel("Requests per minute (empty = none)").fill("1.5");
    await page.getByRole("button", { name: "Save" }).click();
    await poll(() => page.locator(".edit [role=alert]").textContent()).toBe("Invalid request: rpmLimit: rpmLimit must be a whole number");
    await page.getByLabel("Requests per minute (empty = none)").fill("1");
    await page.getByRole("button", { name: "Save" }).click();
    await poll(() => keyRow("browser key").locator("td").nth(5).textContent()).toBe("1 request a minute");
    // The other limits read as words too, and the column headers say what they count.
    expect(await keyRow("browser key").locator("td").nth(4).textContent()).toBe("No limit");
    expect(await keyRow("browser key").locator("td").nth(6).textContent()).toBe("No limit");
    await page.getByRole("button", { name: "Edit browser key" }).click();
    await page.getByLabel("Spend limit (credits, empty = none)").fill("2.5");
    // A tokens-per-minute limit far below a request's worst case (4,096 output tokens) still serves requests.
    await page.getByLabel("Tokens per minute (empty = none)").fill("1000");
    await page.getByRole("button", { name: "Save" }).click();
    await poll(() => keyRow("browser key").locator("td").nth(4).textContent()).toBe("2.5 credits");
    expect(await keyRow("browser key").locator("td").nth(6).textContent()).toBe("1,000 tokens a minute");
    expect(await page.locator("#key-table thead th").allTextContents()).toEqual(
      expect.arrayContaining(["Spend limit", "Requests per minute", "Tokens per minute"]),
    );
    // The row's actions fit a desktop window without scrolling the table.
    const revoke = await page.getByRole("button", { name: "Revoke browser key" }).boundingBox();
    expect(revoke!.x + revoke!.width).toBeLessThanOrEqual(page.viewportSize()!.width);
    await shot(page, "keys");
    // The first request above is from another minute's window or this one: send until refused.
    let refused: unknown;
    for (let i = 0; i < 3 && !refused; i++) await chat().catch((error) => (refused = error));
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect((refused as InstanceType<typeof OpenAI.RateLimitError>).status).toBe(429);
  });

  it("draws usage by day and by model, and the chart follows new traffic", async () => {
    await page.getByRole("button", { name: "Usage" }).click();
    await poll(() => page.locator("#usage-totals").getAttribute("data-requests")).not.toBe(null);
    const before = Number(await page.locator("#usage-totals").getAttribute("data-requests"));
    expect(before).toBeGreaterThan(0);
    await poll(() => page.locator(".chart canvas").count()).toBe(1);
    expect(await page.getByRole("rowheader", { name: "echo-1" }).isVisible()).toBe(true);
    // Lift the limit in the page, then more traffic.
    await page.getByRole("button", { name: "API keys" }).click();
    await page.getByRole("button", { name: "Edit browser key" }).click();
    await page.getByLabel("Requests per minute (empty = none)").fill("");
    await page.getByRole("button", { name: "Save" }).click();
    await poll(() => keyRow("browser key").locator("td").nth(5).textContent()).toBe("No limit");
    await chat();
    await chat();
    await page.getByRole("button", { name: "Usage" }).click();
    await poll(async () => {
      await page.getByRole("button", { name: "Refresh" }).click();
      return Number(await page.locator("#usage-totals").getAttribute("data-requests"));
    }).toBeGreaterThanOrEqual(before + 2);
    await shot(page, "usage");
  });

  it("creates and revokes gateway and personal keys the same way, and lists agents, MCP servers and VMs", async () => {
    await page.getByRole("button", { name: "Gateway & personal keys" }).click();
    await page.getByLabel("New gateway key name").fill("ci gateway key");
    await page.getByRole("button", { name: "Create gateway key" }).click();
    await poll(() => page.getByText("you will not see it again").isVisible()).toBe(true);
    const gatewayKey = await page.getByLabel("Your new API key").inputValue();
    expect(gatewayKey).toMatch(/^sk_/);
    const probe = () => server.request("/gateway/v1/mcp/servers", { headers: { "x-api-key": gatewayKey } });
    expect((await probe()).status).toBe(200);
    await page.getByRole("button", { name: "I have stored it" }).click();
    await page.getByLabel("New personal key name").fill("laptop");
    await page.getByRole("button", { name: "Create personal key" }).click();
    await poll(() => page.getByRole("rowheader", { name: "laptop" }).isVisible()).toBe(true);
    expect(await page.getByLabel("Your new API key").inputValue()).toMatch(/^acct_/);
    await page.getByRole("button", { name: "Revoke ci gateway key" }).click();
    await page.getByRole("button", { name: "Yes, revoke “ci gateway key”" }).click();
    await poll(() => page.getByRole("rowheader", { name: "ci gateway key" }).count()).toBe(0);
    expect((await probe()).status).toBe(401);
    await shot(page, "other-keys");

    // An agent, an upstream MCP server and a VM of the user's tenant, made through the Gateway.
    const gateway = { authorization: `Bearer ${user.token}` };
    upstream = await serveScripted([
      {
        tool: { name: "lookup", description: "look a word up", inputSchema: { type: "object", properties: {} } },
        run: () => ({ content: [{ type: "text", text: "ok" }] }),
      },
    ]);
    expect(
      (
        await server.request("/gateway/v1/mcp/servers", {
          method: "POST",
          headers: gateway,
          json: { name: "dictionary", url: upstream.url },
        })
      ).body.health,
    ).toBe("healthy");
    expect(
      (await server.request("/gateway/v1/agents", { method: "POST", headers: gateway, json: { name: "helper", model: "echo-1" } })).status,
    ).toBe(201);
    vm = await connectVm(vmSocketUrl(server.origin, "agent-vm", { vmId: "build-box" }), user.token);
    await vm.register([{ name: "run_tests", description: "runs the tests" }]);

    await page.getByRole("button", { name: "Agents & tools" }).click();
    await poll(() => page.getByRole("rowheader", { name: "helper" }).isVisible()).toBe(true);
    const serverRow = page.getByRole("row", { name: /dictionary/ });
    await poll(() => serverRow.getByText("healthy").isVisible()).toBe(true);
    await poll(() =>
      page
        .getByRole("row", { name: /build-box/ })
        .getByRole("cell", { name: "1", exact: true })
        .isVisible(),
    ).toBe(true);
    await shot(page, "tools");
  });

  it("revokes the key after a confirmation; the key then gets 401", async () => {
    await page.getByRole("button", { name: "API keys" }).click();
    await page.getByRole("button", { name: "Revoke browser key" }).click();
    await page.getByRole("button", { name: "Yes, revoke “browser key”" }).click();
    await poll(() => page.getByText("Key “browser key” revoked.").isVisible()).toBe(true);
    const error = await chat().catch((caught) => caught);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error.status).toBe(401);
  });

  it("refuses a form that another loopback origin posts to the console with the user's cookie", async () => {
    attacker = createServer((_req, res) => {
      res.setHeader("content-type", "text/html");
      res.end(`<!doctype html><form id="f" method="POST" action="${server.url("/api/api-keys")}" enctype="application/x-www-form-urlencoded">
        <input name="name" value="planted"></form><script>document.getElementById("f").submit()</script>`);
    });
    await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
    const evil = `http://127.0.0.1:${(attacker.address() as { port: number }).port}/`;
    const answer = page.waitForResponse(
      (response) => response.url() === server.url("/api/api-keys") && response.request().method() === "POST",
    );
    await page.goto(evil);
    const response = await answer;
    expect(response.status()).toBe(403);
    expect(await response.json()).toEqual({
      error: { message: `Cross-site request refused: Origin ${evil.replace(/\/$/, "")} is not this service` },
    });
    // The browser did attach the session cookie (same site): only the Origin check stopped it.
    expect((await response.request().allHeaders()).cookie ?? "").toContain("gw_console=");
    const listed = (await server.composition.ports.repos.keys.list(user.user.workspaceId, "platform")).map((key) => key.name);
    expect(listed).not.toContain("planted");
  });

  it("ran with no script error and nothing refused by the Content-Security-Policy", () => {
    expect(pageErrors).toEqual([]);
  });

  it("fits a phone-width screen", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(server.url("/console"));
    await poll(() => page.getByText(user.email).isVisible()).toBe(true);
    const overflow = (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
    expect(overflow).toBeLessThanOrEqual(0);
    await shot(page, "phone");
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it("sends the user back to sign-in with a message when the session ends elsewhere, and signs out", async () => {
    const cookie = (await browser.context.cookies(`${server.origin}/api`)).find((entry) => entry.name === "gw_console")!;
    // The session is revoked from another place (e.g. sign-out in another browser).
    expect((await server.request("/api/session", { method: "DELETE", headers: { cookie: `gw_console=${cookie.value}` } })).status).toBe(
      200,
    );
    await page.getByRole("button", { name: "Usage" }).click();
    await poll(() => page.getByText("Your session has expired or was signed out. Sign in again.").isVisible()).toBe(true);
    await shot(page, "session-expired");
    await page.getByLabel("Email").fill(user.email);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("button", { name: "Sign out" }).click();
    await poll(() => page.getByText("You are signed out.").isVisible()).toBe(true);
    expect((await browser.context.cookies(`${server.origin}/api`)).find((entry) => entry.name === "gw_console")).toBeUndefined();
  });
});
