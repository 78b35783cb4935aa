import { afterAll, beforeAll, describe, expect, it } from "vitest";
import OpenAI from "openai";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { openaiClient, platformAccount, sseData, userMessage } from "../../helpers/chat.js";

/** Gateway chat and models (docs/interface.md 4.4) for session tokens and gateway keys. */

const MODELS = {
  models: { "gw-echo": { provider: "echo", ownedBy: "gateway", contextWindow: 2048 }, "gw-hidden": { provider: "echo", public: false } },
};

let server: TestServer;
let user: Awaited<ReturnType<typeof registerUser>>;
let gatewayKey: string;

beforeAll(async () => {
  server = await startTestServer({ MODELS_JSON: JSON.stringify(MODELS) });
  user = await registerUser(server);
  const created = await server.request("/gateway/v1/auth/keys", {
    method: "POST",
    headers: bearer(user.token),
    json: { name: "ci", description: "chat tests" },
  });
  expect(created.status).toBe(201);
  gatewayKey = created.body.key;
  expect(gatewayKey).toMatch(/^sk_/);
});
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

describe("GET /gateway/v1/models and POST /gateway/v1/chat/completions", () => {
  for (const [label, credential] of [
    ["a session token", () => user.token],
    ["a gateway key", () => gatewayKey],
  ] as const) {
    it(`serve ${label} through the official client`, async () => {
      const client = openaiClient(server, "/gateway/v1", credential());
      const page = await client.models.list();
      expect(page.data.map((entry) => entry.id).sort()).toEqual(Object.keys(MODELS.models).sort());
      expect(page.data.find((entry) => entry.id === "gw-echo")).toMatchObject({
        object: "model",
        owned_by: "gateway",
        context_window: 2048,
      });

      const completion = await client.chat.completions.create({ model: "gw-echo", messages: userMessage("through the gateway") });
      expect(completion).toMatchObject({
        object: "chat.completion",
        model: "gw-echo",
        choices: [{ message: { role: "assistant", content: "through the gateway" } }],
      });

      const stream = await client.chat.completions.create({ model: "gw-echo", messages: userMessage("streamed here"), stream: true });
      const parts: string[] = [];
      for await (const chunk of stream) parts.push(chunk.choices[0]?.delta.content ?? "");
      expect(parts.join("")).toBe("streamed here");
    });
  }

  it("takes a gateway key in X-API-Key too, and ends SSE with [DONE]", async () => {
    const res = await fetch(server.url("/gateway/v1/chat/completions"), {
      method: "POST",
      headers: { "x-api-key": gatewayKey, "content-type": "application/json" },
      body: JSON.stringify({ model: "gw-echo", messages: userMessage("key header"), stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = sseData(await res.text());
    expect(frames.at(-1)).toBe("[DONE]");
    expect((await server.request("/gateway/v1/models", { headers: { "x-api-key": gatewayKey } })).status).toBe(200);
  });

  it("refuses missing or other surfaces' credentials with 401, and bad bodies with 400", async () => {
    const platform = await platformAccount(server);
    for (const headers of [{}, bearer(platform.key), bearer("sk_notarealkey")]) {
      const res = await server.request("/gateway/v1/chat/completions", {
        method: "POST",
        headers,
        json: { model: "gw-echo", messages: userMessage("x") },
      });
      expect(res.status, JSON.stringify(headers)).toBe(401);
    }
    const error = await openaiClient(server, "/gateway/v1", "sk_notarealkey")
      .models.list()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    const missing = await server.request("/gateway/v1/chat/completions", {
      method: "POST",
      headers: bearer(gatewayKey),
      json: { model: "gw-echo" },
    });
    expect(missing.status).toBe(400);
    expect(JSON.stringify(missing.body)).toMatch(/Both model and messages are required/);
  });

  it("refuses a non-public model with 403 listing the usable ids", async () => {
    const error = await openaiClient(server, "/gateway/v1", gatewayKey)
      .chat.completions.create({ model: "gw-hidden", messages: userMessage("x") })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((error as Error).message).toContain("gw-echo");
  });
});
