import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { serveScripted } from "../../helpers/upstream.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";
import { rawFiles, rawRedis } from "../../helpers/raw-storage.js";
import { isCredentialName } from "../../../storage/repos/tool-plans.js";

/**
 * Issue 9 item 10: credential-like header values inside stored tool plans are encrypted at
 * rest and shown redacted by every read of a plan, while the steps still run with them.
 */

const AUTH = "Bearer plan-credential-31c7";
const API_KEY = "plan-api-key-88aa";
const COOKIE = "session=plan-cookie-19fe";

it("names credential-like headers case-insensitively", () => {
  for (const name of [
    "Authorization",
    "authorization",
    "Cookie",
    "X-API-Key",
    "x-api-key",
    "X-Auth-Token",
    "private-key",
    "Proxy-Authorization",
  ])
    expect(isCredentialName(name), name).toBe(true);
  for (const name of ["Accept", "X-Trace", "key", "token", "Content-Type", "keyboard"]) expect(isCredentialName(name), name).toBe(false);
});

describe.each(["memory", "fs", "redis"] as const)("tool plans with credentials (%s)", (storage) => {
  const prefix = uniqueRedisPrefix();
  let dir: string;
  let server: TestServer;
  let headers: Record<string, string>;
  let upstream: Awaited<ReturnType<typeof serveScripted>>;
  /** The `headers` argument each call of the probe tool received. */
  const received: Record<string, unknown>[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gw-plan-secrets-"));
    upstream = await serveScripted([
      {
        tool: {
          name: "fetch",
          description: "fetch a page with headers",
          inputSchema: { type: "object", properties: { url: { type: "string" }, headers: { type: "object" } }, required: ["url"] },
        },
        run: (args) => {
          received.push(args.headers as Record<string, unknown>);
          return { content: [{ type: "text", text: "fetched" }] };
        },
      },
    ]);
    server = await startTestServer({
      MCP_SERVERS_ALLOW_PRIVATE: "true",
      GATEWAY_RATE_LIMIT_RPM: "100000",
      ...(storage === "fs" ? { STORAGE: "fs", DATA_DIR: dir } : storage === "redis" ? { STORAGE: "redis", REDIS_PREFIX: prefix } : {}),
    });
    headers = bearer((await registerUser(server)).token);
    const created = await server.request("/gateway/v1/mcp/servers", { method: "POST", headers, json: { name: "web", url: upstream.url } });
    expect(created.body.health).toBe("healthy");
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
    await upstream.close();
    await rm(dir, { recursive: true, force: true });
    if (storage === "redis") await dropRedisPrefix(prefix);
  });

  it("runs the steps with the real values, stores them sealed and shows them redacted on every read", async () => {
    const stepHeaders = { Authorization: AUTH, "X-API-Key": API_KEY, cookie: COOKIE, "X-Trace": "trace-visible" };
    const executed = await server.request("/gateway/v1/mcp/execute", {
      method: "POST",
      headers,
      json: { steps: [{ tool: "web__fetch", args: { url: "https://example.com", headers: stepHeaders } }] },
    });
    expect(executed.status).toBe(200);
    expect(executed.body.status).toBe("completed");
    expect(received.at(-1)).toEqual(stepHeaders);
    const redacted = { Authorization: "[redacted]", "X-API-Key": "[redacted]", cookie: "[redacted]", "X-Trace": "trace-visible" };
    expect(executed.body.steps[0].args.headers).toEqual(redacted);

    const listed = await server.request("/gateway/v1/mcp/plans", { headers });
    const one = await server.request(`/gateway/v1/mcp/plans/${executed.body.id}`, { headers });
    for (const body of [listed.body, one.body]) {
      const text = JSON.stringify(body);
      for (const secret of ["plan-credential", API_KEY, "plan-cookie"]) expect(text).not.toContain(secret);
    }
    expect(one.body.steps[0].args.headers).toEqual(redacted);
    expect(listed.body.plans.find((plan: { id: string }) => plan.id === executed.body.id).steps[0].args.headers).toEqual(redacted);

    // Executing the stored plan again sends the real values, not the redaction.
    const again = await server.request("/gateway/v1/mcp/execute", { method: "POST", headers, json: { planId: executed.body.id } });
    expect(again.body.status).toBe("completed");
    expect(received.at(-1)).toEqual(stepHeaders);
    expect(JSON.stringify(again.body)).not.toContain("plan-credential");

    if (storage !== "memory") {
      const raw = storage === "fs" ? await rawFiles(dir) : await rawRedis(prefix);
      expect(raw).toContain(executed.body.id);
      expect(raw).toContain("trace-visible");
      for (const secret of ["plan-credential", API_KEY, "plan-cookie"]) expect(raw).not.toContain(secret);
    }
  });
});
