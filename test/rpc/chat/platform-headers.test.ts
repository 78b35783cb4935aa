import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { loopbackFetch, openaiClient, platformAccount, sseData, userMessage, type PlatformAccount } from "../../helpers/chat.js";
import { runAdmin } from "../../../scripts/admin-commands.js";

/**
 * What the Platform API answers besides its body (docs/interface.md 4.2, 7.2): a missing or non-JSON
 * Content-Type is 400 `invalid_request_error` (and 400 on every other surface, in its envelope); no service header but `X-Service-Request-Id`
 * (no Deprecation, X-Model-Warning, X-Accel-Buffering), a deprecated model's notice being in
 * its catalog entry and the request's log line instead. The Account and Gateway surfaces keep
 * the headers.
 */

const MODELS = { models: { "old-echo": { provider: "echo" }, "new-echo": { provider: "echo" } } };
const SERVICE_HEADERS = ["deprecation", "x-model-warning", "x-accel-buffering"];

let server: TestServer;
let account: PlatformAccount;
let user: Awaited<ReturnType<typeof registerUser>>;
let personal: string;

beforeAll(async () => {
  server = await startTestServer({ MODELS_JSON: JSON.stringify(MODELS) });
  account = await platformAccount(server);
  user = await registerUser(server);
  const created = await server.request("/account/v1/keys", { method: "POST", headers: bearer(user.token), json: { name: "cli" } });
  personal = created.body.key;
  const operator = await registerUser(server);
  await runAdmin(["grant-operator", "--email", operator.email], server.composition);
  const patched = await server.request("/gateway/v1/model-registry/models/old-echo", {
    method: "PATCH",
    headers: bearer(operator.token),
    json: { status: "deprecated", statusNote: "use new-echo instead" },
  });
  expect(patched.status).toBe(200);
});
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

const post = (base: string, key: string, body: string, headers: Record<string, string>) =>
  loopbackFetch(server.url(`${base}/chat/completions`), { method: "POST", headers: { ...bearer(key), ...headers }, body });

describe("Content-Type", () => {
  it("answers a missing or non-JSON Content-Type with 400 invalid_request_error on the Platform", async () => {
    const body = JSON.stringify({ model: "new-echo", messages: userMessage("hi") });
    for (const headers of [{}, { "content-type": "text/plain" }, { "content-type": "application/x-www-form-urlencoded" }] as Record<
      string,
      string
    >[]) {
      const res = await post("/api/v1", account.key, body, headers);
      expect(res.status, JSON.stringify(headers)).toBe(400);
      expect(await res.json()).toEqual({
        error: { message: "Content-Type must be application/json", type: "invalid_request_error", code: "bad_request" },
      });
      expect(res.headers.get("x-service-request-id")).toBeNull();
    }
    expect((await post("/api/v1", account.key, body, { "content-type": "application/json" })).status).toBe(200);
  });

  it("answers it with the same 400, never 415, on the Account API, the Gateway and the bridge, each in its envelope", async () => {
    const body = JSON.stringify({ model: "new-echo", messages: userMessage("hi") });
    const account = await post("/account/v1", personal, body, { "content-type": "text/plain" });
    expect(account.status).toBe(400);
    expect(await account.json()).toEqual({ error: { message: "Content-Type must be application/json", type: "invalid_request_error" } });
    const gateway = await post("/gateway/v1", user.token, body, { "content-type": "text/plain" });
    expect(gateway.status).toBe(400);
    expect(await gateway.json()).toEqual({
      error: {
        code: "BAD_REQUEST",
        message: "Content-Type must be application/json",
        requestId: gateway.headers.get("x-request-id"),
      },
    });
    const bridge = await loopbackFetch(server.url("/bridge/tools/execute"), {
      method: "POST",
      headers: { ...bearer(user.token), "content-type": "text/plain" },
      body: JSON.stringify({ tool_name: "x", input: {} }),
    });
    expect(bridge.status).toBe(400);
    expect(((await bridge.json()) as { error: unknown }).error).toMatchObject({
      code: "BAD_REQUEST",
      message: "Content-Type must be application/json",
    });
  });
});

describe("service headers", () => {
  it("adds none but X-Service-Request-Id to Platform answers, streamed or not, even for a deprecated model", async () => {
    for (const stream of [false, true]) {
      const res = await post("/api/v1", account.key, JSON.stringify({ model: "old-echo", messages: userMessage("hi"), stream }), {
        "content-type": "application/json",
      });
      expect(res.status).toBe(200);
      for (const name of SERVICE_HEADERS) expect(res.headers.get(name), `${name} stream=${stream}`).toBeNull();
      expect(res.headers.get("x-service-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      if (stream) {
        expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
        expect(res.headers.get("cache-control")).toBe("no-cache");
        expect(sseData(await res.text()).at(-1)).toBe("[DONE]");
      } else {
        await res.text();
      }
    }
  });

  it("tells Platform callers of the deprecation in the model's catalog entry and in the request's log line", async () => {
    const client = openaiClient(server, "/api/v1", account.key);
    const entry = (await client.models.retrieve("old-echo")) as unknown as Record<string, unknown>;
    expect(entry).toMatchObject({
      id: "old-echo",
      deprecated: true,
      deprecation: { message: "The model 'old-echo' is deprecated: use new-echo instead", deprecatedAt: expect.any(String) },
    });
    const listed = (await client.models.list()).data.find((model) => model.id === "new-echo") as unknown as Record<string, unknown>;
    expect(listed.deprecated).toBeUndefined();

    const answer = await client.chat.completions.create({ model: "old-echo", messages: userMessage("log me") }).withResponse();
    const requestId = answer.response.headers.get("x-service-request-id");
    const line = server.logs().find((entry) => entry.requestId === requestId);
    expect(line).toMatchObject({ modelWarning: "The model 'old-echo' is deprecated: use new-echo instead" });
  });

  it("keeps Deprecation, X-Model-Warning and X-Accel-Buffering on the Account and Gateway surfaces", async () => {
    for (const [base, key] of [
      ["/account/v1", personal],
      ["/gateway/v1", user.token],
    ] as const) {
      const res = await post(base, key, JSON.stringify({ model: "old-echo", messages: userMessage("hi"), stream: true }), {
        "content-type": "application/json",
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("deprecation")).toMatch(/^@\d+$/);
      expect(res.headers.get("x-model-warning")).toBe("The model 'old-echo' is deprecated: use new-echo instead");
      expect(res.headers.get("x-accel-buffering")).toBe("no");
      await res.text();
    }
  });
});
