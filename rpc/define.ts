import type * as v from "valibot";
import type { AuthSpec, Principal } from "./auth.js";
import type { Services } from "./services.js";

/** The HTTP surfaces of the service (DESIGN "Surfaces on one origin"). */
export type Surface = "platform" | "console" | "account" | "gateway" | "bridge";
export type HttpVerb = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface HttpBinding {
  surface: Surface;
  method: HttpVerb;
  /** Path below the surface's base, with `:name` parameters. */
  path: string;
  /** Status of a successful answer (default 200). */
  status?: number;
}

export interface CallContext {
  requestId: string;
  surface: Surface | "rpc";
  principal: Principal | undefined;
  services: Services;
  /** Aborted when the caller goes away. */
  signal: AbortSignal;
  /** Headers added to the response, error or not (e.g. `X-Service-Request-Id`, `Set-Cookie`). */
  responseHeaders: Headers;
  /** The caller's address, for throttling. */
  ip: string;
}

/** Framing of a streamed result over SSE. */
export interface StreamOptions {
  /** A last `data:` line after the stream ends, e.g. `[DONE]` for chat. */
  done?: string;
}

export interface MethodDef<TSchema extends v.GenericSchema = v.GenericSchema, TResult = unknown> {
  /** Dotted name, unique in the registry: `auth.register`. */
  name: string;
  summary: string;
  input: TSchema;
  auth: AuthSpec;
  http: readonly HttpBinding[];
  stream?: StreamOptions;
  handler(params: v.InferOutput<TSchema>, ctx: CallContext): Promise<TResult | AsyncIterable<unknown>> | TResult | AsyncIterable<unknown>;
}

export type AnyMethod = MethodDef<v.GenericSchema, unknown>;

/** Declares one operation; the facade, JSON-RPC and OpenAPI are generated from it. */
export function defineMethod<TSchema extends v.GenericSchema, TResult>(def: MethodDef<TSchema, TResult>): AnyMethod {
  return def as unknown as AnyMethod;
}

export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}
