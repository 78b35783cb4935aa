import type * as v from "valibot";
import type { AuthSpec, Principal } from "./auth.js";
import type { ErrorCode } from "./errors.js";
import type { ClientRelay } from "./relay.js";
import type { SetCookie } from "./cookies.js";

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
  /**
   * Request headers read as params when the query and body do not carry them, header name
   * (lowercase) → param name; e.g. `x-client-id` → `clientId` for the update check.
   */
  headerParams?: Readonly<Record<string, string>>;
  /**
   * The request is handed to the method as it came, not merged into JSON params: the path
   * parameters plus `request: RawRequest` (the billing proxy, raw uploads). The body is still
   * capped at GATEWAY_MAX_PAYLOAD_BYTES (413).
   */
  raw?: boolean;
}

/** A request as a `raw` binding hands it over. Credentials are among the headers: never forward them. */
export interface RawRequest {
  method: HttpVerb;
  /** The query string with its `?`, or "". */
  search: string;
  headers: Record<string, string>;
  body?: Uint8Array;
}

/**
 * An answer that is not JSON (a file's bytes, a relayed upstream answer): REST sends its
 * status, headers and body as they are, a stream without buffering it; JSON-RPC sees its
 * status and content type only.
 */
export class RawReply {
  constructor(
    readonly status: number,
    readonly headers: Headers,
    readonly body: ReadableStream<Uint8Array> | Uint8Array | null,
  ) {}

  toJSON() {
    return { status: this.status, contentType: this.headers.get("content-type") };
  }
}

/**
 * Cross-cutting rules a method declares; the dispatcher applies them on every transport
 * (REST, `/rpc`, MCP, sockets), so none can be skipped by calling through another one.
 */
export interface Policies {
  /**
   * spec 8 GATEWAY_RATE_LIMIT_RPM: counts the call against the caller's per-credential
   * budget for the bridge (shared across instances with STORAGE=redis).
   */
  rateLimit?: "bridge";
  /**
   * TELEMETRY_INGEST_PER_MINUTE: counts the events of the validated batch (`params.events`)
   * against the caller's tenant, shared across instances (rpc/policies/telemetry-ingest.ts).
   */
  ingest?: "telemetry";
}

/** What a handler gets besides its params. `principal` is set whenever the method is not public. */
export interface CallContext<P extends Principal | undefined = Principal | undefined, Deps = unknown> {
  requestId: string;
  surface: Surface | "rpc";
  principal: P;
  /** What the method's domain module built in `init` (rpc/module.ts): only what its handlers use. */
  deps: Deps;
  /** Aborted when the caller goes away. */
  signal: AbortSignal;
  /** Headers added to the response, error or not (e.g. `X-Service-Request-Id`, `Set-Cookie`). */
  responseHeaders: Headers;
  /** The caller's address, for throttling. */
  ip: string;
  /** Sets a cookie on the answer (the console's session cookie), on HTTP transports. */
  setCookie?: SetCookie;
  /** The caller's W3C `traceparent`, passed on to model providers, the orchestrator and the manager. */
  traceparent?: string;
  /** Extra fields for the request's log line (chat: model, tokens, cost, latencies). */
  logFields?: Record<string, unknown>;
  /** The caller asked to hear how a long call progresses (MCP `_meta.progressToken`). */
  onProgress?(update: ProgressUpdate): void;
  /** The MCP client session behind the call, for an upstream server's requests during it (rpc/tools/types.ts ClientRelay). */
  relay?: ClientRelay;
  /**
   * Resolves true once the answer's last byte was handed to the socket, false when the
   * connection closed first. Given by transports that can tell (REST on Node); paid requests
   * settle on it (docs/crash-consistency.md "No charge without an answer").
   */
  delivered?(): Promise<boolean>;
}

/** One step of a long call (MCP `notifications/progress`, without the token). */
export interface ProgressUpdate {
  progress: number;
  total?: number;
  message?: string;
}

/** The context of a method with this auth spec: authenticated methods see a principal, no `!` needed. */
export type ContextFor<A extends AuthSpec, Deps = unknown> = CallContext<A extends "public" ? Principal | undefined : Principal, Deps>;

/** Framing of a streamed result over SSE. */
export interface StreamOptions {
  /** A last `data:` line after the stream ends, e.g. `[DONE]` for chat. */
  done?: string;
}

type MaybePromise<T> = T | Promise<T>;

/** What a handler must return: the declared output's shape when there is one. */
export type ResultOf<O> = O extends v.GenericSchema ? v.InferInput<O> : unknown;

export interface MethodDef<TSchema extends v.GenericSchema = v.GenericSchema, A extends AuthSpec = AuthSpec, O extends v.GenericSchema | undefined = undefined, Deps = unknown> {
  /** Dotted name, unique in the registry: `auth.register`. */
  name: string;
  summary: string;
  input: TSchema;
  /**
   * The result's shape (non-streamed), for the OpenAPI document; the handler's return type is
   * checked against it.
   */
  output?: O;
  auth: A;
  policies?: Policies;
  /** Error codes the handler itself may raise, beyond auth and validation (OpenAPI responses). */
  errors?: readonly ErrorCode[];
  http: readonly HttpBinding[];
  /**
   * A gate for a transport that is not a REST binding (an MCP request, a socket upgrade):
   * reached only through `dispatch` by that transport, never over `/rpc` nor in OpenAPI.
   */
  internal?: boolean;
  stream?: StreamOptions;
  handler(params: v.InferOutput<TSchema>, ctx: ContextFor<A, Deps>): MaybePromise<ResultOf<O> | AsyncIterable<unknown>>;
}

export type AnyMethod = Omit<MethodDef<v.GenericSchema, AuthSpec, v.GenericSchema | undefined>, "handler"> & {
  handler(params: unknown, ctx: CallContext): unknown;
  /** The domain module that declared it (rpc/module.ts `domain(name).method`); its deps reach the handler. */
  domain?: string;
};

/** Declares one operation; the facade, JSON-RPC and OpenAPI are generated from it. */
export function defineMethod<TSchema extends v.GenericSchema, const A extends AuthSpec, O extends v.GenericSchema | undefined = undefined>(
  def: MethodDef<TSchema, A, O>,
): AnyMethod {
  return def as unknown as AnyMethod;
}

export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}
