import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { openSocket, vmSocketUrl } from "../helpers/vm.js";

describe("GATEWAY_RATE_LIMIT_RPM on the bridge", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ GATEWAY_RATE_LIMIT_RPM: "3" });
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  it("answers 429 with Retry-After past the budget, per credential, counting socket upgrades", async () => {
    const a = (await registerUser(server)).token;
    const b = (await registerUser(server)).token;
    const call = (token: string) =>
      server.request("/bridge/tools/execute", { method: "POST", headers: bearer(token), json: { tool_name: "t", vm_id: "none" } });
    expect((await call(a)).status).toBe(503);
    expect((await call(a)).status).toBe(503);
    const ws = await openSocket(vmSocketUrl(server.origin, "x", { vmId: "rl" }), { headers: bearer(a) }); // third request
    ws.close();
    const limited = await call(a);
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe("RATE_LIMITED");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    const refused = await openSocket(vmSocketUrl(server.origin, "x", { vmId: "rl" }), { headers: bearer(a) }).catch((e) => e);
    expect(refused.status).toBe(429);
    // Another credential has its own budget; other surfaces are not counted.
    expect((await call(b)).status).toBe(503);
    expect((await server.request("/gateway/v1/auth/keys", { headers: bearer(a) })).status).toBe(200);
  });

  it("applies the same budget to the method called over POST /rpc (a declared policy, not a REST detail)", async () => {
    const token = (await registerUser(server)).token;
    const viaRpc = (id: number) =>
      server.request("/rpc", {
        method: "POST",
        headers: bearer(token),
        json: { jsonrpc: "2.0", id, method: "bridge.tools.execute", params: { tool_name: "t", vm_id: "none" } },
      });
    for (const id of [1, 2, 3]) expect((await viaRpc(id)).body.error.data.code).toBe("UNAVAILABLE");
    const limited = await viaRpc(4);
    expect(limited.body.error).toMatchObject({ code: -32029, data: { code: "RATE_LIMITED", status: 429 } });
    // REST and /rpc draw on one budget per credential.
    const rest = await server.request("/bridge/tools/execute", {
      method: "POST",
      headers: bearer(token),
      json: { tool_name: "t", vm_id: "none" },
    });
    expect(rest.status).toBe(429);
  });

  it("refuses a VM socket from a browser origin outside GATEWAY_CORS_ORIGINS, like the agent stream", async () => {
    const isolated = await startTestServer({ GATEWAY_CORS_ORIGINS: "https://app.example" });
    try {
      const token = (await registerUser(isolated)).token;
      const refused = await openSocket(vmSocketUrl(isolated.origin, "x", { vmId: "origin-vm" }), {
        headers: { ...bearer(token), origin: "https://evil.example" },
      }).catch((e) => e);
      expect(refused.status).toBe(403);
      const allowed = await openSocket(vmSocketUrl(isolated.origin, "x", { vmId: "origin-vm" }), {
        headers: { ...bearer(token), origin: "https://app.example/" },
      });
      allowed.close();
      expect(isolated.loggedErrors()).toEqual([]);
    } finally {
      await isolated.close();
    }
  });
});

describe("GATEWAY_CORS_ORIGINS", () => {
  it("answers preflights with * by default, but never gives the console cookie surface a wildcard", async () => {
    const server = await startTestServer();
    try {
      const preflight = await fetch(server.url("/bridge/tools/execute"), {
        method: "OPTIONS",
        headers: {
          origin: "https://tools.example",
          "access-control-request-method": "POST",
          "access-control-request-headers": "authorization, content-type",
        },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
      expect(preflight.headers.get("access-control-allow-methods")).toContain("POST");
      expect(preflight.headers.get("access-control-allow-headers")).toBe("authorization, content-type");
      const res = await fetch(server.url("/gateway/v1/auth/keys"), { headers: { origin: "https://tools.example" } });
      expect(res.status).toBe(401);
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(res.headers.get("access-control-expose-headers")).toContain("x-request-id");
      const consolePreflight = await fetch(server.url("/api/api-keys"), {
        method: "OPTIONS",
        headers: { origin: "https://evil.example", "access-control-request-method": "POST" },
      });
      expect(consolePreflight.headers.get("access-control-allow-origin")).toBeNull();
      expect(consolePreflight.headers.get("access-control-allow-credentials")).toBeNull();
    } finally {
      await server.close();
    }
  });

  it("with a list, reflects listed origins only; the console gets credentials for listed origins", async () => {
    const server = await startTestServer({ GATEWAY_CORS_ORIGINS: "https://app.example, https://console.example" });
    try {
      const listed = await fetch(server.url("/bridge/tools/execute"), {
        method: "OPTIONS",
        headers: { origin: "https://app.example", "access-control-request-method": "POST" },
      });
      expect(listed.headers.get("access-control-allow-origin")).toBe("https://app.example");
      expect(listed.headers.get("vary")).toContain("Origin");
      const unlisted = await fetch(server.url("/bridge/tools/execute"), {
        method: "OPTIONS",
        headers: { origin: "https://other.example", "access-control-request-method": "POST" },
      });
      expect(unlisted.headers.get("access-control-allow-origin")).toBeNull();
      const consoleRes = await fetch(server.url("/api/api-keys"), { headers: { origin: "https://console.example" } });
      expect(consoleRes.headers.get("access-control-allow-origin")).toBe("https://console.example");
      expect(consoleRes.headers.get("access-control-allow-credentials")).toBe("true");
    } finally {
      await server.close();
    }
  });
});
