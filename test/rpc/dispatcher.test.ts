import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { defineMethod } from "../../rpc/define.js";
import { Dispatcher, callFacts, type CallFacts } from "../../rpc/dispatcher.js";
import { loadConfig } from "../../rpc/config.js";
import { createLogger } from "../../rpc/log.js";
import { createRegistry } from "../../rpc/registry.js";
import { compose, type Composition } from "../../rpc/compose.js";
import { noTools } from "../../rpc/tools/no-tools.js";
import { isServiceError } from "../../rpc/errors.js";
import { TEST_JWT_SECRET } from "../helpers/server.js";

// The dispatcher alone, without HTTP: the order of its steps and what each transport relies on.
describe("Dispatcher.dispatch", () => {
  let services: Composition;
  let dispatcher: Dispatcher;
  let token: string;
  const lines: string[] = [];
  const seen: unknown[] = [];

  beforeAll(async () => {
    const config = loadConfig({ STORAGE: "memory", GATEWAY_JWT_SECRET: TEST_JWT_SECRET, GATEWAY_RATE_LIMIT_RPM: "2", LOG_LEVEL: "info" });
    services = await compose(config, createLogger("info", (line) => lines.push(line)), noTools);
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
    dispatcher = new Dispatcher(createRegistry([echo, limited, gate]), services.dispatcher.ports);
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

  const facts = (bearer?: string): CallFacts => callFacts({ requestId: "req-1", surface: "rpc", transport: "direct", presented: bearer ? { bearer } : {}, ip: "127.0.0.1" });

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
    expect(onAuthenticated).toHaveBeenCalledWith(expect.objectContaining({ kind: "session", userId: "usr_dispatch" }), expect.objectContaining({ name: "test.echo" }));
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
});
