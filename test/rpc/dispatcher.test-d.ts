import * as v from "valibot";
import { describe, expectTypeOf, it } from "vitest";
import type { Principal } from "../../rpc/auth.js";
import type { Composition } from "../../rpc/compose.js";
import { defineMethod, type ErrorMap, type ImpliedCode, type MethodResult } from "../../rpc/define.js";
import { fromWire, type CallFacts, type Dispatcher } from "../../rpc/dispatcher.js";
import { agentsCancel, type agentsInvoke, agentsSubscribe } from "../../rpc/agents/methods.js";
import { bridgeMcpCapabilities } from "../../rpc/tools/methods.js";
import type { McpOffers } from "../../rpc/tools/ports.js";

// Checked by the type checker only (vitest typecheck): what the typed declarations promise.

const echo = defineMethod({
  name: "test.echo",
  summary: "Returns its params and who called.",
  input: v.object({ n: v.number(), label: v.optional(v.string(), "none") }),
  auth: { kinds: ["session"] },
  errors: { NOT_FOUND: {}, CONFLICT: { message: "Already there" } },
  http: [],
  handler(params, ctx) {
    expectTypeOf(ctx.principal).toEqualTypeOf<Principal>();
    expectTypeOf(params).toEqualTypeOf<{ n: number; label: string }>();
    if (params.n < 0) ctx.fail("NOT_FOUND", "No such n");
    if (params.n === 0) ctx.fail("CONFLICT");
    return { n: params.n, userId: ctx.principal.userId };
  },
});

const open = defineMethod({
  name: "test.open",
  summary: "Public, with a declared output.",
  input: v.object({}),
  output: v.object({ ok: v.boolean() }),
  auth: "public",
  http: [],
  async handler(_params, ctx) {
    expectTypeOf(ctx.principal).toEqualTypeOf<Principal | undefined>();
    // @ts-expect-error a public method declares no NOT_FOUND and its auth implies no 401
    ctx.fail("UNAUTHORIZED");
    ctx.fail("VALIDATION_FAILED", "validation is always part of the contract");
    return { ok: true };
  },
});

const other = defineMethod({
  name: "test.other",
  summary: "Not in the registry below.",
  input: v.object({}),
  auth: "public",
  http: [],
  handler: () => 1,
});

declare const dispatcher: Dispatcher<typeof echo | typeof open>;
declare const facts: CallFacts;

describe("dispatcher.call", () => {
  it("infers the result from the declaration: the handler's return, held to a declared output", () => {
    expectTypeOf(dispatcher.call(echo, { n: 1 }, facts)).resolves.toEqualTypeOf<{ n: number; userId: string }>();
    expectTypeOf(dispatcher.call(open, {}, facts)).resolves.toEqualTypeOf<{ ok: boolean }>();
    expectTypeOf<MethodResult<typeof echo>>().toEqualTypeOf<{ n: number; userId: string }>();
  });

  it("takes the input schema's input (before defaults), or a reader of it", () => {
    dispatcher.call(echo, { n: 1, label: "x" }, facts);
    dispatcher.call(echo, () => Promise.resolve({ n: 2 }), facts);
    // @ts-expect-error n is a number
    dispatcher.call(echo, { n: "one" }, facts);
    // @ts-expect-error n is required
    dispatcher.call(echo, {}, facts);
    // @ts-expect-error label is a string
    dispatcher.call(echo, { n: 1, label: 2 }, facts);
    // Params read from a request are unchecked on purpose: the method's schema validates them.
    dispatcher.call(echo, fromWire({ n: "from a socket" }), facts);
  });

  it("calls only methods of its registry", () => {
    // @ts-expect-error test.other is not registered with this dispatcher
    dispatcher.call(other, {}, facts);
  });

  it("types the service's methods from the module list", () => {
    const service = {} as Composition["dispatcher"];
    expectTypeOf(service.call(agentsCancel, { run_id: "run_1" }, facts)).resolves.toEqualTypeOf<{
      runId: string;
      agentId: string;
      cancelled: boolean;
    }>();
    expectTypeOf(service.call(bridgeMcpCapabilities, {}, facts)).resolves.toEqualTypeOf<McpOffers>();
    expectTypeOf(service.call(agentsSubscribe, { agent_id: "a" }, facts)).resolves.toExtend<AsyncIterable<{ type: string }>>();
    // A streaming method: its events, or its result when it does not stream.
    expectTypeOf<Extract<MethodResult<typeof agentsInvoke>, AsyncIterable<unknown>>>().not.toBeNever();
    // The registry by name: agents.cancel is the local agents' or, with ORCH_BASE_URL, the orchestrator proxy's.
    expectTypeOf(agentsCancel).toExtend<(typeof service.registry)["agents.cancel"]>();
    expectTypeOf(service.registry["auth.login"].auth).toEqualTypeOf<"public">();
    // @ts-expect-error agent_id, not run_id
    service.call(agentsCancel, { agent_id: "a" }, facts);
  });
});

describe("ctx.fail and declared errors", () => {
  it("accepts the declared codes and those the auth spec implies, nothing else", () => {
    defineMethod({
      name: "test.scoped",
      summary: "Needs a scope, answers INSUFFICIENT_CAPABILITY without it.",
      input: v.object({}),
      auth: { kinds: ["account_key"], scopes: ["compute"], scopeError: "INSUFFICIENT_CAPABILITY" },
      errors: { NOT_FOUND: {} },
      http: [],
      handler(_params, ctx) {
        ctx.fail("NOT_FOUND");
        ctx.fail("UNAUTHORIZED");
        ctx.fail("INSUFFICIENT_CAPABILITY");
        // @ts-expect-error CONFLICT is not declared
        ctx.fail("CONFLICT");
        // @ts-expect-error FORBIDDEN: the scope error here is INSUFFICIENT_CAPABILITY, and the method is not operator-only
        ctx.fail("FORBIDDEN");
        return null;
      },
    });
    expectTypeOf<ImpliedCode<{ kinds: ["session"]; operator: true }>>().toEqualTypeOf<"VALIDATION_FAILED" | "UNAUTHORIZED" | "FORBIDDEN">();
    expectTypeOf<ImpliedCode<"public">>().toEqualTypeOf<"VALIDATION_FAILED">();
  });

  it("keys errors by ErrorCode: a misspelt code or a list is refused", () => {
    defineMethod({
      name: "test.typo",
      summary: "x",
      input: v.object({}),
      auth: "public",
      // @ts-expect-error NOT_FOUNDD is no error code
      errors: { NOT_FOUNDD: {} },
      http: [],
      handler: () => null,
    });
    defineMethod({
      name: "test.list",
      summary: "x",
      input: v.object({}),
      auth: "public",
      // @ts-expect-error errors are a map, not a list
      errors: ["NOT_FOUND"],
      http: [],
      handler: () => null,
    });
    expectTypeOf<{ NOT_FOUND: { message: "x" } }>().toExtend<ErrorMap>();
  });

  it("holds the handler to the declared output", () => {
    defineMethod({
      name: "test.output",
      summary: "x",
      input: v.object({}),
      output: v.object({ ok: v.boolean() }),
      auth: "public",
      http: [],
      // @ts-expect-error ok is a boolean
      handler: () => ({ ok: "yes" }),
    });
  });
});
