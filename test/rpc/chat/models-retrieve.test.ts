import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APIError } from "openai";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { openaiClient, platformAccount } from "../../helpers/chat.js";

/** `GET /models/{id}` on the Platform, Account and Gateway surfaces: what `openai.models.retrieve` calls. */

const MODELS = JSON.stringify({
  models: { "echo-a": { provider: "echo", ownedBy: "house", contextWindow: 4096 }, "pro-only": { provider: "echo", plans: ["pro"] } },
});
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ MODELS_JSON: MODELS });
});
afterAll(async () => {
  await server.close();
});

async function status(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 200;
  } catch (error) {
    if (error instanceof APIError) return error.status ?? 0;
    throw error;
  }
}

describe("GET /models/{id}", () => {
  it("Platform: the list's entry, 404 for an unknown id, 402 without credits, 401 without a key", async () => {
    const account = await platformAccount(server);
    const client = openaiClient(server, "/api/v1", account.key);
    const model = await client.models.retrieve("echo-a");
    expect(model).toMatchObject({ id: "echo-a", object: "model", owned_by: "house", context_window: 4096 });
    const listed = (await client.models.list()).data.find((entry) => entry.id === "echo-a");
    expect(model).toEqual(listed);
    const missing = await server.request("/api/v1/models/nope", { headers: bearer(account.key) });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ type: "not_found_error" });

    const broke = await platformAccount(server, 0);
    expect(await status(openaiClient(server, "/api/v1", broke.key).models.retrieve("echo-a"))).toBe(402);
    expect(await status(openaiClient(server, "/api/v1", "sk-gateway-wrong").models.retrieve("echo-a"))).toBe(401);
  });

  it("Account: the entry with whether the plan unlocks it", async () => {
    const user = await registerUser(server);
    const created = await server.request("/account/v1/keys", {
      method: "POST",
      headers: bearer(user.token),
      json: { name: "cli", scopes: ["intelligence"] },
    });
    expect(created.status).toBe(201);
    const client = openaiClient(server, "/account/v1", created.body.key);
    expect(await client.models.retrieve("echo-a")).toMatchObject({ id: "echo-a", object: "model", available: true });
    expect(await client.models.retrieve("pro-only")).toMatchObject({ id: "pro-only", available: false });
    expect(await status(client.models.retrieve("nope"))).toBe(404);
  });

  it("Gateway: sessions and gateway keys", async () => {
    const user = await registerUser(server);
    const client = openaiClient(server, "/gateway/v1", user.token);
    expect(await client.models.retrieve("echo-a")).toMatchObject({ id: "echo-a", object: "model" });
    expect(await status(client.models.retrieve("nope"))).toBe(404);
    expect((await server.request("/gateway/v1/models/echo-a")).status).toBe(401);
  });
});
