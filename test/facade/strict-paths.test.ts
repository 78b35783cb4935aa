import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { openaiClient, platformAccount } from "../helpers/chat.js";
import { strictPathViolation } from "../../facade/strict-paths.js";

/**
 * Strict paths (docs/security.md "Strict paths"): dot segments, backslashes and encoded slashes
 * get 400 before routing, in the envelope of the surface the path starts in, so nothing is
 * routed across surfaces. A model id may hold an encoded slash, as the `openai` client sends it.
 */

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({ models: { echo: { provider: "echo" }, "org/echo-b": { provider: "echo" } } }),
  });
  token = (await registerUser(server)).token;
});
afterAll(async () => {
  await server?.close();
});

/** Sends `path` byte for byte (fetch and URL would resolve dot segments before sending). */
function rawGet(
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any; headers: Record<string, unknown> }> {
  const { port } = new URL(server.origin);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port: Number(port), path, method: "GET", headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined, headers: res.headers }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("strict paths", () => {
  it("encoded dot segments do not walk from one surface to another: 400 in the envelope of the surface the path starts in", async () => {
    const platform = await rawGet("/api/v1/%2e%2e/%2e%2e/gateway/v1/auth/me", bearer(token));
    expect(platform.status).toBe(400);
    expect(platform.body.error).toMatchObject({ type: "invalid_request_error" });
    expect(platform.body.error.message).toContain("'.' or '..' segment");
    const gateway = await rawGet("/gateway/v1/%2e%2e/%2e%2e/metrics");
    expect(gateway.status).toBe(400);
    expect(gateway.body.error.code).toBe("BAD_REQUEST");
    expect(gateway.headers["x-service-request-id"] ?? gateway.headers["x-request-id"]).toBeTruthy();
  });

  it("literal dot segments, mixed forms, backslashes and encoded slashes get 400 on every surface", async () => {
    for (const path of [
      "/gateway/v1/../../metrics",
      "/gateway/v1/./auth/me",
      "/account/v1/.%2e/keys",
      "/bridge/v1/%2E%2E/mcp/tools",
      "/gateway/v1/agents\\..\\x",
      "/gateway/v1/agents%5c..%5cx",
      "/gateway/v1/agents/a%2Fb",
      "/rpc/%2e%2e",
      "/console/assets/%2e%2e%2fpackage.json",
    ]) {
      const res = await rawGet(path, bearer(token));
      expect(res.status, path).toBe(400);
    }
  });

  it("a model id with an encoded slash is served: openai's models.retrieve and the model registry", async () => {
    const gateway = openaiClient(server, "/gateway/v1", token);
    expect(await gateway.models.retrieve("org/echo-b")).toMatchObject({ id: "org/echo-b" });
    const account = await platformAccount(server);
    expect(await openaiClient(server, "/api/v1", account.key).models.retrieve("org/echo-b")).toMatchObject({ id: "org/echo-b" });
    const entry = await rawGet(`/gateway/v1/model-registry/models/${encodeURIComponent("org/echo-b")}`, bearer(token));
    expect(entry.status).toBe(200);
    expect(entry.body).toMatchObject({ id: "org/echo-b" });
    const health = await rawGet(`/gateway/v1/model-registry/models/${encodeURIComponent("org/echo-b")}/health`, bearer(token));
    expect(health.status).toBe(200);
    // ...but not a dot segment hidden in it.
    expect((await rawGet("/gateway/v1/models/..%2Fauth%2Fme", bearer(token))).status).toBe(400);
  });

  it("ordinary paths with dots and percent-encoding are untouched", async () => {
    expect((await rawGet("/gateway/v1/auth/me", bearer(token))).status).toBe(200);
    expect((await rawGet("/gateway/v1/models/no.such%20model", bearer(token))).status).toBe(404);
    expect((await rawGet("/openapi.json")).status).toBe(200);
  });

  it("the rule, case by case", () => {
    expect(strictPathViolation("/a/b.c/d")).toBeUndefined();
    expect(strictPathViolation("/a/...")).toBeUndefined();
    expect(strictPathViolation("/a/%2e")).toBe("a '.' or '..' segment");
    expect(strictPathViolation("/a/.%2E/b")).toBe("a '.' or '..' segment");
    expect(strictPathViolation("/a/b%5Cc")).toBe("a backslash");
    expect(strictPathViolation("/gateway/v1/tenants/a%2Fb/members")).toBe("an encoded slash (%2F)");
    expect(strictPathViolation("/api/v1/models/a%2Fb")).toBeUndefined();
    expect(strictPathViolation("/gateway/v1/model-registry/models/a%2Fb/health")).toBeUndefined();
    expect(strictPathViolation("/gateway/v1/model-registry/models/a%2F%2E%2E")).toBe("a '.' or '..' segment");
    expect(strictPathViolation("/gateway/v1/models/a%2Fb%2")).toBe("a malformed percent-encoding");
  });
});
