import OpenAI from "openai";
import { bearer, registerUser, type TestServer } from "./server.js";
import { consoleSignIn, withCookie, type ConsoleCookie } from "./console.js";

export const MICRO = 1_000_000;

/**
 * The platform's own fetch, taken before any msw server patches it: requests to our loopback
 * server go around msw (its pass-through can lose the last frames of a stream that ends right
 * after them), while the server's calls to mocked providers still meet the msw handlers.
 */
export const loopbackFetch: typeof fetch = globalThis.fetch;

export interface PlatformAccount {
  user: Awaited<ReturnType<typeof registerUser>>;
  cookie: ConsoleCookie;
  workspaceId: string;
  /** A platform key made through POST /api/api-keys. */
  key: string;
  keyId: string;
}

/** A registered user with a console-created platform key and `credits` granted to the workspace. */
export async function platformAccount(server: TestServer, credits = 100): Promise<PlatformAccount> {
  const user = await registerUser(server);
  const cookie = await consoleSignIn(server, user.email, user.password);
  const created = await server.request("/api/api-keys", { method: "POST", headers: withCookie(cookie), json: { name: "test key" } });
  if (created.status !== 201) throw new Error(`key create failed: ${created.status} ${JSON.stringify(created.body)}`);
  if (credits > 0) await server.composition.ports.repos.credits.grant(user.user.workspaceId, credits * MICRO);
  return { user, cookie, workspaceId: user.user.workspaceId, key: created.body.key, keyId: created.body.id };
}

/** Another platform key in the same workspace (console endpoint), optionally with limits set through PATCH. */
export async function consoleKey(
  server: TestServer,
  account: PlatformAccount,
  limits: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
) {
  const created = await server.request("/api/api-keys", {
    method: "POST",
    headers: withCookie(account.cookie),
    json: { name: "limited", ...extra },
  });
  if (created.status !== 201) throw new Error(`key create failed: ${created.status} ${JSON.stringify(created.body)}`);
  if (Object.keys(limits).length) {
    const patched = await server.request(`/api/api-keys/${created.body.id}`, {
      method: "PATCH",
      headers: withCookie(account.cookie),
      json: limits,
    });
    if (patched.status !== 200) throw new Error(`key patch failed: ${patched.status} ${JSON.stringify(patched.body)}`);
  }
  return { key: created.body.key as string, id: created.body.id as string };
}

/** The official client pointed at one surface of the test server; no retries so each call is one request. */
export function openaiClient(
  server: TestServer,
  base: string,
  apiKey: string,
  options: Partial<ConstructorParameters<typeof OpenAI>[0]> = {},
) {
  return new OpenAI({ apiKey, baseURL: server.url(base), maxRetries: 0, timeout: 15_000, fetch: loopbackFetch, ...options });
}

/** Parses an SSE body into its `data:` payloads. */
export function sseData(text: string): string[] {
  return text
    .split(/\n\n/)
    .map((event) =>
      event
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => line.slice(6))
        .join("\n"),
    )
    .filter((data) => data !== "");
}

export const userMessage = (content: string) => [{ role: "user" as const, content }];

/** One model's row of the caller's metered usage (`GET /gateway/v1/usage/models`). */
export interface UsageRow {
  model: string;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  credits: number;
}

/** The caller's metered usage by model. */
export async function usageByModel(server: TestServer, token: string): Promise<Record<string, UsageRow>> {
  const res = await server.request("/gateway/v1/usage/models", { headers: { authorization: `Bearer ${token}` } });
  if (res.status !== 200) throw new Error(`GET /gateway/v1/usage/models answered ${res.status}`);
  return Object.fromEntries((res.body.rows as UsageRow[]).map((row) => [row.model, row]));
}

/** One model's usage, zero when it has none yet. */
export async function usageOf(server: TestServer, token: string, model: string): Promise<UsageRow> {
  return (await usageByModel(server, token))[model] ?? { model, requests: 0, inputTokens: 0, outputTokens: 0, credits: 0 };
}

export type RegisteredUser = Awaited<ReturnType<typeof registerUser>>;

/**
 * The two callers of the dialect tests: `alice`, who calls the Gateway API with her session
 * token, and `bob`, who calls the Account API with a personal key (`bobKey`, named `keyName`).
 */
export async function twoCallers(
  server: TestServer,
  keyName: string,
): Promise<{ alice: RegisteredUser; bob: RegisteredUser; bobKey: string }> {
  const alice = await registerUser(server);
  const bob = await registerUser(server);
  const key = await server.request("/account/v1/keys", { method: "POST", headers: bearer(bob.token), json: { name: keyName } });
  return { alice, bob, bobKey: key.body.key as string };
}
