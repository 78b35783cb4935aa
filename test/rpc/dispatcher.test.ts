import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { defineMethod } from "../../rpc/define.js";
import { Dispatcher, callFacts, fromWire, type CallFacts } from "../../rpc/dispatcher.js";
import { loadConfig } from "../../rpc/config.js";
import { createLogger } from "../../rpc/log.js";
import { createRegistry } from "../../rpc/registry.js";
import { compose, type Composition } from "../../rpc/compose.js";
import { noTools } from "../../rpc/tools/no-tools.js";
import { isServiceError, ServiceError } from "../../rpc/errors.js";
import { TEST_JWT_SECRET } from "../helpers/server.js";

const seen: unknown[] = [];
const echo = defineMethod({
  name: "test.echo",
  summary: "Returns its params and who called.",
  input: v.object({ n: v.number("n must be a number") }),
  auth: { kinds: ["session"] },
  http: [],
  handler(params, ctx) {
    seen.push(params);
    return { n: params.n, userId: ctx.principal.userId };
  },
});

/** Raises what `code` says: declared, implied by its auth, or neither. */
const failing = defineMethod({
  name: "test.failing",
  summary: "Fails as asked.",
  input: v.object({ code: v.picklist(["NOT_FOUND", "UNAUTHORIZED", "CONFLICT", "crash"]) }),
  auth: { kinds: ["session"] },
  errors: { NOT_FOUND: { message: "No such thing" } },
  http: [],
  handler(params, ctx) {
    if (params.code === "NOT_FOUND") ctx.fail("NOT_FOUND");
    if (params.code === "UNAUTHORIZED") ctx.fail("UNAUTHORIZED", "Account gone");
    if (params.code === "CONFLICT") throw new ServiceError("CONFLICT", "not declared");
    throw new Error("crash");
  },
});
const unregistered = defineMethod({
  name: "test.unregistered",
  summary: "x",
  input: v.object({}),
  auth: "public",
  http: [],
  handler: () => 1,
});

// The dispatcher alone, without HTTP: the order of its steps and what each transport relies on.
describe("Dispatcher.dispatch", () => {
  let services: Composition;
  let dispatcher: Dispatcher;
  let token: string;
  const lines: string[] = [];

  beforeAll(async () => {
    const config = loadConfig({ STORAGE: "memory", GATEWAY_JWT_SECRET: TEST_JWT_SECRET, GATEWAY_RATE_LIMIT_RPM: "2", LOG_LEVEL: "info" });
    services = await compose(
      config,
      createLogger("info", (line) => lines.push(line)),
      noTools,
    );
    const limited = defineMethod({
      name: "test.limited",
      summary: "Counts against the bridge budget.",
      input: v.object({}),
      auth: { kinds: ["session"] },
      policies: { rateLimit: "bridge" },
      http: [],
      handler: () => "ok",
    });
    const gate = defineMethod({
      name: "test.gate",
      summary: "A transport gate.",
      input: v.object({}),
      auth: "public",
      internal: true,
      http: [],
      handler: () => "admitted",
    });
    dispatcher = new Dispatcher(createRegistry([echo, limited, gate, failing]), services.dispatcher.ports, new Map(), {
      checkDeclaredErrors: true,
    });
    await services.ports.repos.users.put({
      id: "usr_dispatch",
      email: "dispatch@example.com",
      passwordHash: "x",
      fullName: "D",
      tenantId: "ten_d",
      workspaceId: "wsp_d",
      plan: "free",
      createdAt: new Date().toISOString(),
    } as never);
    token = (await services.ports.sessions.issue("usr_dispatch")).token;
  });
  afterAll(() => services.close());

  const facts = (bearer?: string): CallFacts =>
    callFacts({ requestId: "req-1", surface: "rpc", transport: "direct", presented: bearer ? { bearer } : {}, ip: "127.0.0.1" });

  it("authenticates before it reads the params: a caller without credentials never makes a body be read", async () => {
    const read = vi.fn(() => ({ n: 1 }));
    const error = await dispatcher.dispatch("test.echo", read, facts()).catch((e) => e);
    expect(isServiceError(error) && error.code).toBe("UNAUTHORIZED");
    expect(read).not.toHaveBeenCalled();
  });

  it("validates after authentication and hands the handler a narrowed principal", async () => {
    const invalid = await dispatcher.dispatch("test.echo", { n: "one" }, facts(token)).catch((e) => e);
    expect(isServiceError(invalid) && invalid.code).toBe("VALIDATION_FAILED");
    const onAuthenticated = vi.fn();
    const result = await dispatcher.dispatch("test.echo", () => ({ n: 2 }), { ...facts(token), onAuthenticated });
    expect(result).toEqual({ n: 2, userId: "usr_dispatch" });
    expect(onAuthenticated).toHaveBeenCalledWith(
      expect.objectContaining({ kind: "session", userId: "usr_dispatch" }),
      expect.objectContaining({ name: "test.echo" }),
    );
  });

  it("applies declared policies whatever the transport, before the params are read", async () => {
    const read = vi.fn(() => ({}));
    expect(await dispatcher.dispatch("test.limited", read, facts(token))).toBe("ok");
    expect(await dispatcher.dispatch("test.limited", read, facts(token))).toBe("ok");
    const limited = await dispatcher.dispatch("test.limited", read, facts(token)).catch((e) => e);
    expect(isServiceError(limited) && limited.code).toBe("RATE_LIMITED");
    expect(read).toHaveBeenCalledTimes(2);
  });

  it("serves internal gates through dispatch only: JSON-RPC does not know them", async () => {
    expect(await dispatcher.dispatch("test.gate", {}, facts())).toBe("admitted");
    const answer = await dispatcher.jsonrpc.receive({ jsonrpc: "2.0", id: 1, method: "test.gate", params: {} }, facts());
    expect(answer?.error?.code).toBe(-32601);
    const unknown = await dispatcher.dispatch("no.such", {}, facts()).catch((e) => e);
    expect(isServiceError(unknown) && unknown.code).toBe("METHOD_NOT_FOUND");
  });

  it("calls a declaration: the registered one by identity, typed params and result", async () => {
    const result = await dispatcher.call(echo, { n: 3 }, facts(token));
    expect(result).toEqual({ n: 3, userId: "usr_dispatch" });
    const invalid = await dispatcher.call(echo, fromWire({ n: "three" }), facts(token)).catch((e) => e);
    expect(isServiceError(invalid) && invalid.code).toBe("VALIDATION_FAILED");
    const missing = await dispatcher.call(unregistered, {}, facts()).catch((e) => e);
    expect(isServiceError(missing) && missing.code).toBe("METHOD_NOT_FOUND");
  });

  it("gives handlers ctx.fail, worded as declared unless told, and logs a code outside the method's contract in test runs", async () => {
    const raised = (code: string) => dispatcher.dispatch("test.failing", { code }, facts(token)).catch((e) => e);
    const undeclared = () => lines.map((line) => JSON.parse(line)).filter((line) => line.event === "method.undeclared_error");
    const notFound = await raised("NOT_FOUND");
    expect(notFound).toMatchObject({ code: "NOT_FOUND", message: "No such thing", status: 404 });
    expect(await raised("UNAUTHORIZED")).toMatchObject({ code: "UNAUTHORIZED", message: "Account gone" });
    // An unexpected exception is INTERNAL, in every contract.
    expect(await raised("crash")).toMatchObject({ message: "crash" });
    expect(undeclared()).toEqual([]);
    // The caller's answer is unchanged; the log line (level error) fails a test server that meets it.
    expect(await raised("CONFLICT")).toMatchObject({ code: "CONFLICT", message: "not declared" });
    expect(undeclared()).toEqual([
      expect.objectContaining({ level: "error", method: "test.failing", code: "CONFLICT", requestId: "req-1" }),
    ]);
  });
});
