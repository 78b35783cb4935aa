import { JSONRPCErrorException, JSONRPCServer } from "json-rpc-2.0";
import { authenticate, type Presented } from "./auth.js";
import { isAsyncIterable, type AnyMethod, type CallContext, type Surface } from "./define.js";
import type { Principal } from "./auth.js";
import { ServiceError, toServiceError } from "./errors.js";
import type { Registry } from "./registry.js";
import type { Services } from "./services.js";
import { parseParams } from "./validate.js";

/** What a transport knows about one call before the dispatcher takes over. */
export interface CallInfo {
  requestId: string;
  surface: Surface | "rpc";
  presented: Presented;
  signal: AbortSignal;
  responseHeaders: Headers;
  ip: string;
}

export interface Prepared {
  method: AnyMethod;
  principal: Principal | undefined;
}

/** Streamed results returned over plain JSON-RPC are collected, up to this many items. */
const MAX_COLLECTED_ITEMS = 10_000;

/**
 * The one place an operation runs: look up the method, authenticate (before validation, so a
 * caller without credentials learns nothing about the body), validate, call the handler.
 * REST, JSON-RPC over HTTP and the WebSocket adapters all come through `call`.
 */
export class Dispatcher {
  readonly registry: Registry;
  readonly services: Services;
  readonly jsonrpc: JSONRPCServer<CallInfo>;

  constructor(registry: Registry, services: Services) {
    this.registry = registry;
    this.services = services;
    this.jsonrpc = new JSONRPCServer<CallInfo>({ errorListener: () => undefined });
    for (const name of Object.keys(registry)) {
      this.jsonrpc.addMethod(name, async (params, info) => {
        try {
          const result = await this.call(name, params ?? {}, info);
          if (!isAsyncIterable(result)) return result ?? null;
          const items: unknown[] = [];
          for await (const item of result) {
            if (items.length >= MAX_COLLECTED_ITEMS) break;
            items.push(item);
          }
          return items;
        } catch (error) {
          throw this.toJsonRpcError(error, info.requestId);
        }
      });
    }
  }

  /** Looks up the method and authenticates the caller for it. */
  async authorize(name: string, info: CallInfo): Promise<Prepared> {
    const method = this.registry[name];
    if (!method) throw new ServiceError("METHOD_NOT_FOUND", `Unknown method: ${name}`);
    const principal = await authenticate(info.presented, method.auth, this.services);
    return { method, principal };
  }

  /** Validates the params and runs the handler of an authorized call. */
  async run(prepared: Prepared, rawParams: unknown, info: CallInfo): Promise<unknown> {
    const params = parseParams(prepared.method.input, rawParams);
    const ctx: CallContext = {
      requestId: info.requestId,
      surface: info.surface,
      principal: prepared.principal,
      services: this.services,
      signal: info.signal,
      responseHeaders: info.responseHeaders,
      ip: info.ip,
    };
    return prepared.method.handler(params, ctx);
  }

  async call(name: string, rawParams: unknown, info: CallInfo): Promise<unknown> {
    return this.run(await this.authorize(name, info), rawParams, info);
  }

  toJsonRpcError(error: unknown, requestId: string): JSONRPCErrorException {
    const serviceError = toServiceError(error);
    if (serviceError.code === "INTERNAL") this.services.log.error({ requestId, error: describe(error) });
    return new JSONRPCErrorException(serviceError.message, serviceError.rpcCode, {
      code: serviceError.code,
      status: serviceError.status,
      requestId,
      ...(serviceError.details === undefined ? {} : { details: serviceError.details }),
    });
  }
}

export function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}\n${error.stack ?? ""}`.slice(0, 4000);
  return String(error);
}
