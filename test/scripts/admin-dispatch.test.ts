import { execFile } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, startTestServer, TEST_DATA_SECRET, TEST_JWT_SECRET, type TestServer } from "../helpers/server.js";
import { consoleSignIn, withCookie } from "../helpers/console.js";
import { eventually } from "../helpers/eventually.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";
import { loadConfig } from "../../rpc/config.js";
import { compose } from "../../rpc/compose.js";
import { callFacts } from "../../rpc/dispatcher.js";
import { createLogger } from "../../rpc/log.js";
import { noTools } from "../../rpc/tools/no-tools.js";
import { runAdmin } from "../../scripts/admin-commands.js";

/**
 * `npm run admin` dispatches the operator methods the HTTP routes dispatch (docs/console-and-admin.md):
 * the same rules, caps, events and log lines. The command runs as a child process on the
 * server's Redis prefix, so what it wrote is on the shared bus the moment it exits.
 */

const prefix = uniqueRedisPrefix();
let server: TestServer;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json(): any;
  /** The JSON log lines the command wrote on stderr. */
  logs(): Record<string, unknown>[];
}

function admin(...args: string[]): Promise<Run> {
  const env = {
    ...process.env,
    STORAGE: "redis",
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: prefix,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    LOG_LEVEL: "info",
  };
  return new Promise((resolve) => {
    execFile(join("node_modules", ".bin", "tsx"), ["scripts/admin.ts", ...args], { env, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
      const logs = () =>
        stderr
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as Record<string, unknown>);
      resolve({ code, stdout, stderr, json: () => JSON.parse(stdout), logs });
    });
  });
}

const PASSWORD = "Correct-Horse-9";
let email: string;
let workspace: string;
let session: string;

beforeAll(async () => {
  server = await startTestServer({ STORAGE: "redis", REDIS_PREFIX: prefix });
  email = `op-${prefix}@example.com`;
  const created = await admin("create-user", "--email", email, "--name", "Operator", "--password", PASSWORD);
  expect(created.code, created.stderr).toBe(0);
  workspace = created.json().user.workspaceId;
  const granted = await admin("grant-operator", "--email", email);
  expect(granted.code, granted.stderr).toBe(0);
  const login = await server.request("/gateway/v1/auth/login", { method: "POST", json: { email, password: PASSWORD } });
  expect(login.status).toBe(200);
  session = login.body.token;
}, 180_000);

afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
  await dropRedisPrefix(prefix);
});

type BusEvent = { type: string; topic: string; source: string; payload: Record<string, unknown> };
const keyEvents = async () =>
  (await server.request("/gateway/v1/events?type=key.created&limit=100", { headers: bearer(session) })).body.data as BusEvent[];

describe("npm run admin dispatches the operator methods", () => {
  it("create-key emits key.created as the console's key creation does, on the bus before the command exits", async () => {
    const made = await admin("create-key", "--workspace", workspace, "--name", "from admin", "--rpm", "60");
    expect(made.code, made.stderr).toBe(0);
    const adminKey = made.json();
    expect(adminKey).toMatchObject({ workspace, name: "from admin", scopes: ["chat:write"], rpmLimit: 60 });
    // No waiting: the command closed its composition, which waits for the events it emitted.
    const fromAdmin = (await keyEvents()).find((event) => event.payload.keyId === adminKey.id);
    expect(fromAdmin).toMatchObject({
      type: "key.created",
      topic: "key",
      source: "gateway",
      payload: { keyId: adminKey.id, kind: "platform", name: "from admin" },
    });
    expect(JSON.stringify(fromAdmin)).not.toContain(adminKey.key);

    const cookie = await consoleSignIn(server, email, PASSWORD);
    const viaConsole = await server.request("/api/api-keys", {
      method: "POST",
      headers: withCookie(cookie),
      json: { name: "from console" },
    });
    expect(viaConsole.status).toBe(201);
    const fromConsole = await eventually(async () => (await keyEvents()).find((event) => event.payload.keyId === viaConsole.body.id));
    expect(Object.keys(fromAdmin!.payload).sort()).toEqual(Object.keys(fromConsole!.payload).sort());
    expect(fromAdmin).toMatchObject({
      type: fromConsole!.type,
      topic: fromConsole!.topic,
      source: fromConsole!.source,
      payload: { kind: fromConsole!.payload.kind },
    });

    // The dispatcher's line for the call, on stderr; stdout is the answer alone.
    expect(made.logs()).toContainEqual(
      expect.objectContaining({
        event: "call",
        method: "operator.keys.create",
        principal: { kind: "service", userId: "admin" },
        outcome: "ok",
      }),
    );
    expect(made.stderr).not.toContain(adminKey.key);
  }, 120_000);

  it("holds grant-credits to the credit-grant cap and the decimals rule of POST /gateway/v1/operator/credits", async () => {
    const http = (credits: number) =>
      server.request("/gateway/v1/operator/credits", {
        method: "POST",
        headers: bearer(session),
        json: { workspaceId: workspace, credits },
      });
    const before = await server.composition.ports.repos.credits.balance(workspace);

    for (const [credits, rule] of [
      ["1000000001", /credits is at most 1,000,000,000 per grant/],
      ["0.0000001", /credits has at most 6 decimals/],
      ["-3", /credits must be positive/], // (as --credits=-3)
    ] as const) {
      const overHttp = await http(Number(credits));
      expect(overHttp.status).toBe(400);
      expect(overHttp.body.error.message).toMatch(rule);
      const overAdmin = await admin("grant-credits", "--workspace", workspace, `--credits=${credits}`);
      expect(overAdmin.code, overAdmin.stderr).toBe(2);
      expect(overAdmin.stderr).toMatch(rule);
      expect(overAdmin.logs()).toContainEqual(
        expect.objectContaining({ event: "call", method: "operator.credits.grant", outcome: "VALIDATION_FAILED" }),
      );
    }
    expect(await server.composition.ports.repos.credits.balance(workspace)).toBe(before);

    // The cap itself is allowed on both paths, and logged alike.
    const overHttp = await http(1_000_000_000);
    expect(overHttp.status).toBe(200);
    expect(overHttp.body.granted).toBe(1_000_000_000_000_000);
    const overAdmin = await admin("grant-credits", "--workspace", workspace, "--credits", "1000000000");
    expect(overAdmin.code, overAdmin.stderr).toBe(0);
    expect(overAdmin.json()).toEqual({ workspace, granted: 1_000_000_000, balance: (before + 2_000_000_000_000_000) / 1_000_000 });
    const serverLine = server.logs().find((line) => line.event === "credits.granted" && line.workspaceId === workspace)!;
    const adminLine = overAdmin.logs().find((line) => line.event === "credits.granted")!;
    expect(adminLine).toMatchObject({ workspaceId: workspace, microCredits: 1_000_000_000_000_000, by: "admin" });
    expect(Object.keys(adminLine).sort()).toEqual(Object.keys(serverLine).sort());
  }, 180_000);

  it("offers its own operations as internal methods: not over /rpc, REST or OpenAPI", async () => {
    const internal = [
      "operator.users.create",
      "operator.users.get",
      "operator.users.update",
      "operator.workspaces.create",
      "operator.keys.create",
      "operator.mcp.servers.share",
      "operator.mcp.servers.shared",
      "operator.mcp.servers.unshare",
    ];
    for (const method of internal) {
      expect(server.dispatcher.registry[method]?.internal, method).toBe(true);
      const rpc = await server.request("/rpc", {
        method: "POST",
        headers: bearer(session),
        json: { jsonrpc: "2.0", id: 1, method, params: { email } },
      });
      expect(rpc.body.error.code, method).toBe(-32601);
    }
    const openapi = JSON.stringify((await server.request("/openapi.json")).body);
    for (const method of internal) expect(openapi).not.toContain(method);
    // An operator's session is not the local administrator.
    const asOperator = await server.dispatcher
      .dispatch(
        "operator.users.update",
        { email, operator: false },
        callFacts({ surface: "rpc", transport: "direct", presented: { bearer: session } }),
      )
      .catch((error: unknown) => error);
    expect(asOperator).toMatchObject({ code: "UNAUTHORIZED" });
    expect((await server.composition.ports.repos.users.byEmail(email))!.operator).toBe(true);
  });
});

describe("the admin command's composition", () => {
  it("closes only once the events its commands emitted are on the bus", async () => {
    const config = loadConfig({ STORAGE: "memory", LOG_LEVEL: "silent" });
    const composition = await compose(config, createLogger("silent"), noTools);
    const order: string[] = [];
    const { eventLog } = composition.ports;
    const publish = eventLog.publish.bind(eventLog);
    // A slow bus: the event is written well after the command answered.
    vi.spyOn(eventLog, "publish").mockImplementation(async (input) => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const event = await publish(input);
      order.push(`published ${event.type}`);
      return event;
    });
    const close = eventLog.close.bind(eventLog);
    vi.spyOn(eventLog, "close").mockImplementation(async () => {
      order.push("bus closed");
      await close();
    });
    const { user } = (await runAdmin(["create-user", "--email", "slow-bus@example.com"], composition)) as { user: { workspaceId: string } };
    await runAdmin(["create-key", "--workspace", user.workspaceId, "--name", "k"], composition);
    expect(order).toEqual([]);
    await composition.close();
    expect(order).toEqual(["published key.created", "bus closed"]);
  });
});
