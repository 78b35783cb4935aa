import { JSONRPCErrorException, JSONRPCServer } from "json-rpc-2.0";
import type { CallFacts } from "./call-facts.js";
import { isAsyncIterable, type AnyMethod, type CallContext, type Fail, type MethodParams, type MethodResult } from "./define.js";
import { ServiceError, type ErrorCode } from "./errors.js";
import { failFor, runChecked } from "./method-errors.js";
import { renderError, type CallSurface } from "./surfaces.js";
import { chainOf, runChain, type MethodChain } from "./policies/chain.js";
import type { PolicyCall } from "./policies/policy.js";
import type { Registry } from "./registry.js";
import type { CorePorts } from "./ports.js";
import { parseParams } from "./validate.js";
import { outgoingTraceparent } from "./tracing.js";

export { callFacts, type CallFacts, type CallFactsInit, type CallTransport } from "./call-facts.js";

/**
 * The params of a call: a value, or a function that reads them (a REST body) and runs only
 * once the caller is authenticated, so a caller without credentials learns nothing about the body.
 */
export type ParamsSource<P = unknown> = P | ((method: AnyMethod) => P | Promise<P>);

declare const wire: unique symbol;

/**
 * Params as a request carried them (a REST body, a socket message, an upgrade's query), not
 * yet checked: `dispatcher.call` takes them for any method, and the method's input schema
 * validates them like typed ones (400 / -32602 when they do not fit). `fromWire` marks them,
 * so passing unchecked data is a visible choice at the call site.
 */
export type WireParams = { readonly [wire]: true };

/** Marks params read from a request as unchecked input for `dispatcher.call` (see WireParams). */
export function fromWire(params: ParamsSource): WireParams {
  return params as WireParams;
}

export interface DispatcherOptions {
  /**
   * Log an error line (`method.undeclared_error`) when a handler raises a code its method's
   * contract does not list (rpc/method-errors.ts), so a test server fails on it; the answer is
   * unchanged. On in test runs (vitest sets `VITEST`), off otherwise.
   */
  checkDeclaredErrors?: boolean;
}

/** Streamed results returned over plain JSON-RPC are collected, up to this many items. */
const MAX_COLLECTED_ITEMS = 10_000;

/**
 * The one entry every transport calls (REST, `POST /rpc`, the MCP endpoint, the VM socket
 * and the agent stream): look up the method, run the policy chain (rpc/policies/chain.ts:
 * observe, authenticate, refuse archived workspaces' keys, operators only, rate limit), read
 * and validate the params, run the params' policies (telemetry ingest) and the handler.
 */
export class Dispatcher<M extends AnyMethod = AnyMethod> {
  readonly registry: Registry<M>;
  /** What the core reads: authentication, limiters, the log, shutdown hooks. */
  readonly ports: CorePorts;
  /** Each domain module's deps by domain name (rpc/compose.ts); a handler gets its own domain's. */
  readonly deps: ReadonlyMap<string, unknown>;
  readonly jsonrpc: JSONRPCServer<CallFacts>;
  readonly #chains = new Map<string, MethodChain>();
  readonly #checkDeclaredErrors: boolean;

  constructor(registry: Registry<M>, ports: CorePorts, deps: ReadonlyMap<string, unknown> = new Map(), options: DispatcherOptions = {}) {
    this.registry = registry;
    this.ports = ports;
    this.deps = deps;
    this.#checkDeclaredErrors = options.checkDeclaredErrors ?? process.env.VITEST !== undefined;
    this.jsonrpc = new JSONRPCServer<CallFacts>({ errorListener: () => undefined });
    for (const method of Object.values(registry)) {
      if (method.internal) continue;
      // Former names (a rename, docs/versioning.md) still answer over `/rpc`.
      for (const name of [method.name, ...(method.formerNames ?? [])])
        this.jsonrpc.addMethod(name, async (params, facts) => {
          try {
            const result = await this.dispatch(method.name, params ?? {}, facts);
            if (!isAsyncIterable(result)) return result ?? null;
            const items: unknown[] = [];
            for await (const item of result) {
              if (items.length >= MAX_COLLECTED_ITEMS) break;
              items.push(item);
            }
            return items;
          } catch (error) {
            throw this.toJsonRpcError(error, facts.requestId);
          }
        });
    }
  }

  /**
   * Calls a declared method: what code with a known method uses (the sockets, the MCP codec,
   * REST with the route's method). The params are the method's input (or `fromWire(…)` for
   * unchecked ones), the result what its handler returns (`MethodResult`). A method this dispatcher's registry does not hold is
   * METHOD_NOT_FOUND, like an unknown name.
   */
  call<K extends M>(method: K, params: ParamsSource<MethodParams<K>> | WireParams, facts: CallFacts): Promise<MethodResult<K>> {
    if (this.registry[method.name] !== method)
      return Promise.reject(new ServiceError("METHOD_NOT_FOUND", `Unknown method: ${method.name}`));
    return this.dispatch(method.name, params, facts) as Promise<MethodResult<K>>;
  }

  /** Calls a method by name: for transports that route by name (`POST /rpc`). */
  async dispatch(name: string, params: ParamsSource, facts: CallFacts): Promise<unknown> {
    const method = this.registry[name];
    if (!method) throw new ServiceError("METHOD_NOT_FOUND", `Unknown method: ${name}`);
    const chain = this.#chainOf(method, facts.surface);
    const call: PolicyCall = { method, facts, ports: this.ports };
    return runChain(chain.call, call, async () => {
      const raw = typeof params === "function" ? await (params as (method: AnyMethod) => unknown)(method) : params;
      call.params = parseParams(method.input, raw);
      return runChain(chain.params, call, async () => this.#run(call));
    });
  }

  /** The chain of a method through a surface, worked out once (rpc/policies/chain.ts). */
  #chainOf(method: AnyMethod, surface: CallSurface): MethodChain {
    const key = `${surface}\0${method.name}`;
    let chain = this.#chains.get(key);
    if (!chain) this.#chains.set(key, (chain = chainOf(method, surface)));
    return chain;
  }

  /** The handler; in test runs, an error outside the method's contract is logged (rpc/method-errors.ts). */
  #run(call: PolicyCall): unknown {
    const { method, facts } = call;
    if (!this.#checkDeclaredErrors) return method.handler(call.params, this.#context(call));
    return runChecked(method, call.params, this.#context(call), facts.surface, (code) =>
      this.ports.log.error({
        requestId: facts.requestId,
        event: "method.undeclared_error",
        method: method.name,
        code,
        message: `${method.name} raised ${code}, which its declaration does not list: add it to its errors`,
      }),
    );
  }

  #context({ method, facts, principal }: PolicyCall): CallContext & { fail: Fail<ErrorCode> } {
    return {
      requestId: facts.requestId,
      surface: facts.surface,
      principal,
      deps: method.domain === undefined ? undefined : this.deps.get(method.domain),
      signal: facts.signal,
      responseHeaders: facts.responseHeaders,
      ip: facts.ip,
      // The call's own span while tracing (orchestrator, manager and billing proxy continue it).
      traceparent: outgoingTraceparent(facts.traceparent),
      logFields: facts.logFields,
      ...(facts.onProgress ? { onProgress: facts.onProgress } : {}),
      ...(facts.relay ? { relay: facts.relay } : {}),
      ...(facts.setCookie ? { setCookie: facts.setCookie } : {}),
      ...(facts.delivered ? { delivered: facts.delivered } : {}),
      fail: failFor(method),
    };
  }

  toJsonRpcError(error: unknown, requestId: string): JSONRPCErrorException {
    const serviceError = renderError("rpc", error, requestId, this.ports.log).error;
    return new JSONRPCErrorException(serviceError.message, serviceError.rpcCode, {
      code: serviceError.code,
      status: serviceError.status,
      requestId,
      ...(serviceError.details === undefined ? {} : { details: serviceError.details }),
    });
  }
}
