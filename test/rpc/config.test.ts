import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../rpc/config.js";
import { loadModels } from "../../rpc/chat/models-config.js";

describe("configuration", () => {
  it("uses documented defaults", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      PORT: 8787,
      STORAGE: "fs",
      DATA_DIR: "./data",
      GATEWAY_MAX_PAYLOAD_BYTES: 1048576,
      GATEWAY_RATE_LIMIT_RPM: 120,
      GATEWAY_API_RATE_LIMIT_RPM: 600,
    });
  });

  it("has the quotas' documented defaults (docs/quotas.md)", () => {
    expect(loadConfig({})).toMatchObject({
      GATEWAY_TENANT_RATE_LIMIT_RPM: 3000,
      QUOTA_KEYS_PER_USER: 50,
      QUOTA_VM_SOCKETS_PER_TENANT: 50,
      QUOTA_VM_TOOLS_PER_TENANT: 5000,
      QUOTA_MCP_SERVERS_PER_TENANT: 20,
      QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT: 100,
      QUOTA_STREAMS_PER_KEY: 100,
      QUOTA_STREAM_LEASE_SECONDS: 15,
    });
    // docs/storage.md "Leases": what a dead instance held ends within seconds.
    expect(loadConfig({})).toMatchObject({ AGENT_RUN_LEASE_SECONDS: 15, HOLD_LEASE_SECONDS: 30, WEBHOOKS_LEASE_SECONDS: 5 });
    expect(loadConfig({ QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT: "0" }).QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT).toBe(0);
  });

  it.each([
    ["PORT", "eighty"],
    ["PORT", "70000"],
    ["STORAGE", "postgres"],
    ["GATEWAY_JWT_SECRET", "short"],
    ["REDIS_URL", "http://localhost"],
    ["REDIS_URL", "redis://localhost:6379/zero"],
    ["REDIS_URL", "redis://"],
    ["REDIS_ALLOW_EVICTION", "yes"],
    ["AGENT_RUN_LEASE_SECONDS", "1"],
    ["GATEWAY_MAX_PAYLOAD_BYTES", "-1"],
    ["GATEWAY_API_RATE_LIMIT_RPM", "0"],
    ["GATEWAY_API_RATE_LIMIT_RPM", "many"],
    ["ACCOUNT_KEY_PREFIX", "NoUnderscore"],
    ["GATEWAY_TENANT_RATE_LIMIT_RPM", "0"],
    ["QUOTA_KEYS_PER_USER", "-1"],
    ["QUOTA_VM_SOCKETS_PER_TENANT", "lots"],
    ["QUOTA_STREAMS_PER_KEY", "2.5"],
    ["QUOTA_STREAM_LEASE_SECONDS", "1"],
  ])("refuses %s=%s with a message naming it", (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    try {
      loadConfig({ [name]: value });
    } catch (error) {
      expect((error as Error).message).toContain(name);
    }
  });

  it("names a secret that is too short, never its value", () => {
    const value = "short-but-still-a-secret";
    for (const name of ["GATEWAY_JWT_SECRET", "SERVICE_JWT_SECRET", "DATA_ENCRYPTION_SECRET", "PLATFORM_SERVICE_KEY"]) {
      try {
        loadConfig({ [name]: value.slice(0, 12) });
        expect.unreachable(name);
      } catch (error) {
        expect((error as Error).message).toContain(`${name}=<12 characters, not shown>`);
        expect((error as Error).message).not.toContain(value.slice(0, 12));
      }
    }
  });

  it.each([
    ["MANAGER_BASE_URL", "ftp://x"],
    ["MANAGER_BASE_URL", "file:///etc/passwd"],
    ["ORCH_BASE_URL", "ws://orchestrator.internal"],
    ["PUBLIC_URL", "javascript:alert(1)"],
  ])("refuses %s=%s: outbound and published addresses are http(s) only", (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(`${name}="${value}": must be an http:// or https:// URL`);
  });

  it("accepts http and https addresses", () => {
    expect(loadConfig({ MANAGER_BASE_URL: "https://manager.internal/v1", ORCH_BASE_URL: "http://127.0.0.1:9000" })).toMatchObject({
      MANAGER_BASE_URL: "https://manager.internal/v1",
      ORCH_BASE_URL: "http://127.0.0.1:9000",
    });
  });

  it("never prints a URL's password, even one that makes the URL invalid", () => {
    for (const [name, value] of [
      ["REDIS_URL", "redis://:hunter2/with-slash@127.0.0.1:6379"],
      ["REDIS_URL", "redis://user:hunter2@127.0.0.1:6379/db"],
      ["MANAGER_BASE_URL", "ftp://user:hunter2@manager.internal"],
      ["ORCH_BASE_URL", "http://user:hunter2@[not-a-host"],
    ]) {
      let message = "";
      try {
        loadConfig({ [name!]: value });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, value).toContain(name);
      expect(message, value).not.toContain("hunter2");
    }
  });

  it("never prints the part of a JSON setting the parser quotes", () => {
    const secret = "sk-live-0123456789abcdef";
    // MODELS_JSON is read by loadModels; PLANS_JSON by the money module: both report through ConfigError.
    const models = (() => {
      try {
        loadModels({ MODELS_JSON: `{"models": {"x": {"headers": ${secret}}}}` });
      } catch (error) {
        return error as Error;
      }
    })();
    expect(models).toBeInstanceOf(ConfigError);
    const plans = new ConfigError([`PLANS_JSON: not valid JSON (${jsonParseMessage(`{"free": ${secret}}`)})`]);
    for (const error of [models!, plans]) {
      expect(error.message).toMatch(/(MODELS|PLANS)_JSON: not valid JSON \(Unexpected token 's' \(the text is not shown\)\)/);
      expect(error.message).not.toContain("sk-live");
    }
  });

  it("stops `npm start` with a message naming the bad variable", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", "scripts/start.ts"], {
      env: { ...process.env, PORT: "not-a-port", STORAGE: "memory" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).toBe(1);
    expect(stderr).toContain("PORT");
  });
});

function jsonParseMessage(text: string): string {
  try {
    JSON.parse(text);
    return "";
  } catch (error) {
    return (error as Error).message;
  }
}
