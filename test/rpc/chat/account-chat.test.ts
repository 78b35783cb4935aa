import { afterAll, beforeAll, describe, expect, it } from "vitest";
import OpenAI, { type APIError } from "openai";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { openaiClient, platformAccount, userMessage } from "../../helpers/chat.js";
import { createKey } from "../../../rpc/keys/create-key.js";
import { countPromptTokens } from "../../../rpc/chat/tokens.js";

/** Account API (docs/interface.md 4.1, 5, 7.1): personal keys, plan-aware catalog, chat on the plan allowance. */

const MODELS = {
  models: {
    "acct-echo": { provider: "echo" },
    "pro-echo": { provider: "echo", plans: ["pro"] },
    hidden: { provider: "echo", public: false },
  },
};
// A tiny allowance so a test can spend it: any request is more than one token.
const PLANS = {
  free: { name: "Free", tokensPerWindow: 1_000_000, windowSeconds: 3600 },
  tiny: { name: "Tiny", tokensPerWindow: countPromptTokens(userMessage("spend the allowance")) + 1, windowSeconds: 3600 },
  thirty: { name: "Thirty", tokensPerWindow: 30, windowSeconds: 3600 },
  pro: { tokensPerWindow: 1_000_000, windowSeconds: 3600 },
};

let server: TestServer;
let user: Awaited<ReturnType<typeof registerUser>>;

beforeAll(async () => {
  server = await startTestServer({ MODELS_JSON: JSON.stringify(MODELS), PLANS_JSON: JSON.stringify(PLANS) });
  user = await registerUser(server);
});
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

async function personalKey(token = user.token, json: Record<string, unknown> = { name: "laptop" }) {
  const res = await server.request("/account/v1/keys", { method: "POST", headers: bearer(token), json });
  expect(res.status).toBe(201);
  return res.body as { id: string; key: string; name: string; scopes: string[] };
}

describe("personal keys", () => {
  it("are created, listed without their secret, and revoked by the signed-in user", async () => {
    const created = await personalKey();
    expect(created.key).toMatch(/^acct_[A-Za-z0-9_-]{20,}$/);
    expect(created.scopes).toEqual(["intelligence", "compute"]);
    expect(created.name).toBe("laptop");

    const list = await server.request("/account/v1/keys", { headers: bearer(user.token) });
    expect(list.status).toBe(200);
    const entry = list.body.data.find((item: { id: string }) => item.id === created.id);
    expect(entry).toMatchObject({ id: created.id, name: "laptop", scopes: ["intelligence", "compute"] });
    expect(JSON.stringify(list.body)).not.toContain(created.key);
    expect(entry).not.toHaveProperty("key");

    const client = openaiClient(server, "/account/v1", created.key);
    await client.chat.completions.create({ model: "acct-echo", messages: userMessage("before revoke") });

    const revoked = await server.request(`/account/v1/keys/${created.id}`, { method: "DELETE", headers: bearer(user.token) });
    expect(revoked.status).toBe(200);
    const after = await server.request("/account/v1/models", { headers: bearer(created.key) });
    expect(after.status).toBe(401);
    expect(after.body).toEqual({ error: expect.any(String), code: "UNAUTHORIZED" });
    const listed = await server.request("/account/v1/keys", { headers: bearer(user.token) });
    expect(listed.body.data.map((item: { id: string }) => item.id)).not.toContain(created.id);
  });

  it("cannot be managed with a key, and another user's key is not found", async () => {
    const created = await personalKey();
    const withKey = await server.request("/account/v1/keys", { method: "POST", headers: bearer(created.key), json: { name: "minted" } });
    // A valid key on a session-only route: 403 saying what to do, not a 401 that reads like a bad key.
    expect(withKey.status).toBe(403);
    expect(withKey.body).toEqual({ error: "API keys cannot manage keys; sign in", code: "FORBIDDEN" });
    const other = await registerUser(server);
    const foreign = await server.request(`/account/v1/keys/${created.id}`, { method: "DELETE", headers: bearer(other.token) });
    expect(foreign.status).toBe(404);
  });

  it("refuses a bad create body with 400", async () => {
    for (const json of [{}, { name: "" }, { name: 5 }, { name: "x", scopes: ["admin"] }, { name: "x", scopes: [] }]) {
      const res = await server.request("/account/v1/keys", { method: "POST", headers: bearer(user.token), json });
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(res.body.error.type).toBe("invalid_request_error");
    }
  });
});

describe("GET /account/v1/models", () => {
  it("lists the catalog with the account's plan attached", async () => {
    const { key } = await personalKey();
    const page = await openaiClient(server, "/account/v1", key).models.list();
    expect(page.data.map((entry) => entry.id).sort()).toEqual(Object.keys(MODELS.models).sort());
    const raw = await server.request("/account/v1/models", { headers: bearer(key) });
    expect(raw.status).toBe(200);
    expect(raw.body.object).toBe("list");
    expect(raw.body.plan).toMatchObject({ id: "free", name: "Free", tokensPerWindow: 1_000_000, windowSeconds: 3600 });
    const byId = Object.fromEntries(raw.body.data.map((entry: { id: string }) => [entry.id, entry]));
    // Which tiers the plan unlocks.
    expect(byId["acct-echo"].available).toBe(true);
    expect(byId["pro-echo"].available).toBe(false);
  });
});

describe("POST /account/v1/chat/completions", () => {
  it("answers with the official client, streaming or not", async () => {
    const { key } = await personalKey();
    const client = openaiClient(server, "/account/v1", key);
    const completion = await client.chat.completions.create({ model: "acct-echo", messages: userMessage("hello account") });
    expect(completion.choices[0]!.message.content).toBe("hello account");
    expect(completion.usage!.completion_tokens).toBe(2);

    const plain = await client.chat.completions.create({ model: "acct-echo", messages: userMessage("a b c"), stream: true });
    const chunks = [];
    for await (const chunk of plain) chunks.push(chunk);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe("a b c");
    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
  });

  it("puts usage on the final chunk with stream_options.include_usage", async () => {
    const { key } = await personalKey();
    const stream = await openaiClient(server, "/account/v1", key).chat.completions.create({
      model: "acct-echo",
      messages: userMessage("count these words"),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ completion_tokens: 3 });
    expect(last.usage!.total_tokens).toBe(last.usage!.prompt_tokens + 3);
    expect(chunks.slice(0, -1).some((chunk) => chunk.usage)).toBe(false);
  });

  it("needs scope intelligence: a compute-only key gets 403 INSUFFICIENT_CAPABILITY but may read the catalog", async () => {
    const { secret } = await createKey(
      { ...server.composition.ports, keys: server.composition.ports.repos.keys },
      { kind: "account", owner: user.user.id, userId: user.user.id, name: "old key", scopes: ["compute"] },
    );
    const res = await server.request("/account/v1/chat/completions", {
      method: "POST",
      headers: bearer(secret),
      json: { model: "acct-echo", messages: userMessage("x") },
    });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: expect.any(String), code: "INSUFFICIENT_CAPABILITY" });
    const error = (await openaiClient(server, "/account/v1", secret)
      .chat.completions.create({ model: "acct-echo", messages: userMessage("x") })
      .catch((e: unknown) => e)) as APIError;
    expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((await server.request("/account/v1/models", { headers: bearer(secret) })).status).toBe(200);
  });

  it("refuses a model outside the plan, and a non-public one, with 403", async () => {
    const { key } = await personalKey();
    for (const model of ["pro-echo", "hidden"]) {
      const res = await server.request("/account/v1/chat/completions", {
        method: "POST",
        headers: bearer(key),
        json: { model, messages: userMessage("x") },
      });
      expect(res.status).toBe(403);
      expect(res.body.code).toEqual(expect.any(String));
      expect(res.body.error).toContain("acct-echo");
    }
  });

  it("serves while something of the plan allowance remains, then answers 429 insufficient_quota naming the plan", async () => {
    const spender = await registerUser(server);
    const userRecord = (await server.composition.ports.repos.users.get(spender.user.id))!;
    await server.composition.ports.repos.users.put({ ...userRecord, plan: "tiny" });
    const { key } = await personalKey(spender.token);
    const client = openaiClient(server, "/account/v1", key);
    // The worst case (prompt + max_tokens 2) is one token more than the whole allowance: still
    // served, its hold capped at what remains, and the metered usage charged.
    const first = await client.chat.completions.create({ model: "acct-echo", messages: userMessage("spend the allowance"), max_tokens: 2 });
    expect(first.usage!.total_tokens).toBe(PLANS.tiny.tokensPerWindow + 1);
    const res = await server.request("/account/v1/chat/completions", {
      method: "POST",
      headers: bearer(key),
      json: { model: "acct-echo", messages: userMessage("x") },
    });
    expect(res.status).toBe(429);
    expect(res.body).toEqual({
      error: {
        message: `You have used the Tiny plan's allowance of ${PLANS.tiny.tokensPerWindow} tokens for this period`,
        type: "insufficient_quota",
      },
    });
    const error = await client.chat.completions.create({ model: "acct-echo", messages: userMessage("x") }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    // The catalog shows the spent allowance.
    const models = await server.request("/account/v1/models", { headers: bearer(key) });
    expect(models.body.plan).toMatchObject({ id: "tiny", used: PLANS.tiny.tokensPerWindow + 1, remaining: 0 });
  });

  it("serves a 9-token request on a 30-token plan though its worst case (4,096 output tokens) is far more", async () => {
    const small = await registerUser(server);
    await server.composition.ports.repos.users.put({ ...(await server.composition.ports.repos.users.get(small.user.id))!, plan: "thirty" });
    const { key } = await personalKey(small.token);
    const messages = userMessage("one two");
    expect(countPromptTokens(messages)).toBe(9);
    const answer = await openaiClient(server, "/account/v1", key).chat.completions.create({ model: "acct-echo", messages });
    expect(answer.choices[0]!.message.content).toBe("one two");
    expect(answer.usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 2 });
    const models = await server.request("/account/v1/models", { headers: bearer(key) });
    expect(models.body.plan).toMatchObject({ id: "thirty", used: 11, remaining: 19 });
  });

  it("uses flat {error, code} for 401 and {error: {message, type}} for request errors", async () => {
    const platform = await platformAccount(server);
    for (const headers of [{}, bearer("acct_nonexistentkeyvalue000000000000"), bearer(platform.key), { authorization: "Token abc" }]) {
      const res = await server.request("/account/v1/chat/completions", {
        method: "POST",
        headers,
        json: { model: "acct-echo", messages: userMessage("x") },
      });
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.body).toEqual({ error: expect.any(String), code: "UNAUTHORIZED" });
    }
    const { key } = await personalKey();
    const missing = await server.request("/account/v1/chat/completions", {
      method: "POST",
      headers: bearer(key),
      json: { model: "acct-echo" },
    });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({
      error: { message: expect.stringMatching(/Both model and messages are required/), type: "invalid_request_error" },
    });
    const error = await openaiClient(server, "/account/v1", "acct_nonexistentkeyvalue000000000000")
      .models.list()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
  });
});
