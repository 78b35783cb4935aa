import { JSONRPCErrorException, JSONRPCServer } from "json-rpc-2.0";
import type { CallFacts } from "./call-facts.js";
import { isAsyncIterable, type AnyMethod, type CallContext } from "./define.js";
import { ServiceError } from "./errors.js";
import { renderError, type CallSurface } from "./surfaces.js";
import { chainOf, runChain, type MethodChain } from "./policies/chain.js";
import type { PolicyCall } from "./policies/policy.js";
import type { Registry } from "./registry.js";
import type { CorePorts } from "./ports.js";
import { parseParams } from "./validate.js";

export { callFacts, type CallFacts, type CallFactsInit, type CallTransport } from "./call-facts.js";

/**
 * The params of a call: a value, or a function that reads them (a REST body) and runs only
 * once the caller is authenticated, so a caller without credentials learns nothing about the body.
 */
export type ParamsSource = unknown | ((method: AnyMethod) => unknown | Promise<unknown>);

/** Streamed results returned over plain JSON-RPC are collected, up to this many items. */
const MAX_COLLECTED_ITEMS = 10_000;

/**
 * The one entry every transport calls (REST, `POST /rpc`, the MCP endpoint, the VM socket
 * and the agent stream): look up the method, run the policy chain (rpc/policies/chain.ts:
 * observe, authenticate, refuse archived workspaces' keys, operators only, rate limit), read
 * and validate the params, run the params' policies (telemetry ingest) and the handler.
 */
export class Dispatcher {
  readonly registry: Registry;
  /** What the core reads: authentication, limiters, the log, shutdown hooks. */
  readonly ports: CorePorts;
  /** Each domain module's deps by domain name (rpc/compose.ts); a handler gets its own domain's. */
  readonly deps: ReadonlyMap<string, unknown>;
  readonly jsonrpc: JSONRPCServer<CallFacts>;
  readonly #chains = new Map<string, MethodChain>();

  constructor(registry: Registry, ports: CorePorts, deps: ReadonlyMap<string, unknown> = new Map()) {
    this.registry = registry;
    this.ports = ports;
    this.deps = deps;
    this.jsonrpc = new JSONRPCServer<CallFacts>({ errorListener: () => undefined });
    for (const method of Object.values(registry)) {
      if (method.internal) continue;
      this.jsonrpc.addMethod(method.name, async (params, facts) => {
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

  async dispatch(name: string, params: ParamsSource, facts: CallFacts): Promise<unknown> {
    const method = this.registry[name];
    if (!method) throw new ServiceError("METHOD_NOT_FOUND", `Unknown method: ${name}`);
    const chain = this.#chainOf(method, facts.surface);
    const call: PolicyCall = { method, facts, ports: this.ports };
    return runChain(chain.call, call, async () => {
      const raw = typeof params === "function" ? await (params as (method: AnyMethod) => unknown)(method) : params;
      call.params = parseParams(method.input, raw);
      return runChain(chain.params, call, async () => method.handler(call.params, this.#context(call)));
    });
  }

  /** The chain of a method through a surface, worked out once (rpc/policies/chain.ts). */
  #chainOf(method: AnyMethod, surface: CallSurface): MethodChain {
    const key = `${surface}\0${method.name}`;
    let chain = this.#chains.get(key);
    if (!chain) this.#chains.set(key, (chain = chainOf(method, surface)));
    return chain;
  }

  #context({ method, facts, principal }: PolicyCall): CallContext {
    return {
      requestId: facts.requestId,
      surface: facts.surface,
      principal,
      deps: method.domain === undefined ? undefined : this.deps.get(method.domain),
      signal: facts.signal,
      responseHeaders: facts.responseHeaders,
      ip: facts.ip,
      traceparent: facts.traceparent,
      logFields: facts.logFields,
      ...(facts.onProgress ? { onProgress: facts.onProgress } : {}),
      ...(facts.relay ? { relay: facts.relay } : {}),
      ...(facts.setCookie ? { setCookie: facts.setCookie } : {}),
      ...(facts.delivered ? { delivered: facts.delivered } : {}),
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

