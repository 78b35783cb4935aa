import type * as v from "valibot";
import type { AuthSpec, Principal } from "./auth.js";
import type { ErrorCode, ServiceErrorOptions } from "./errors.js";
import type { ClientRelay } from "./relay.js";
import type { SetCookie } from "./cookies.js";

/** The HTTP surfaces of the service (docs/architecture.md "Surfaces on one origin"). */
export type Surface = "platform" | "console" | "account" | "gateway" | "bridge";
export type HttpVerb = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/**
 * A client dialect a route speaks in place of its surface's own conventions: `anthropic` for
 * the Messages API routes, which read `x-api-key` too and answer errors in Anthropic's envelope
 * and statuses (rpc/surfaces.ts DIALECTS, docs/dialects.md).
 */
export type Dialect = "anthropic";

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
   * When set, the only query parameters read, query name → param name; any other is ignored.
   * For routes whose body is read tolerantly and forwarded (docs/dialects.md), so a query
   * parameter never becomes a body field.
   */
  queryParams?: Readonly<Record<string, string>>;
  /**
   * The request is handed to the method as it came, not merged into JSON params: the path
   * parameters plus `request: RawRequest` (the billing proxy, raw uploads). The body is still
   * capped at GATEWAY_MAX_PAYLOAD_BYTES (413).
   */
  raw?: boolean;
  /** The route's dialect, when it is not the surface's own (rpc/surfaces.ts DIALECTS). */
  dialect?: Dialect;
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
   * docs/interface.md 8 GATEWAY_RATE_LIMIT_RPM: counts the call against the caller's per-credential
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

/** One error a method declares it raises. Its status and JSON-RPC code come from rpc/errors.ts ERROR_TABLE. */
export interface ErrorDecl {
  /**
   * When this method answers it, in the caller's words: the OpenAPI response's description, and
   * the message `ctx.fail(code)` uses when given none.
   */
  readonly message?: string;
  /**
   * The status the method's surface answers this code with, when not ERROR_TABLE's: the
   * Platform API renders an upstream timeout as 502 (rpc/surfaces.ts).
   */
  readonly status?: number;
}

/**
 * The errors a method's handler raises itself, keyed by code: `{ NOT_FOUND: {}, CONFLICT: {
 * message: "…" } }`. Together with the ones its auth, input and policies imply (rpc/method-errors.ts)
 * they are its OpenAPI error responses and the codes `ctx.fail` accepts.
 */
export type ErrorMap = { readonly [C in ErrorCode]?: ErrorDecl };

/** No declared errors. */
export type NoErrors = Record<never, never>;

type ScopeErrorOf<A> = A extends { scopeError: infer S extends ErrorCode } ? S : "FORBIDDEN";
type HasScopes<A> = A extends { scopes: readonly [] } ? false : A extends { scopes: readonly string[] } ? true : false;

/**
 * Codes a handler may raise without declaring them, because its auth spec and input already
 * put them in its contract (rpc/method-errors.ts `impliedErrors` is the same rule at run time):
 * `VALIDATION_FAILED` (a check the schema cannot express), `UNAUTHORIZED` on an authenticated
 * method (the caller's account went away meanwhile), the scope error of a method that requires
 * scopes and `FORBIDDEN` of an operator-only or session-only method.
 */
export type ImpliedCode<A extends AuthSpec> =
  | "VALIDATION_FAILED"
  | (A extends "public"
      ? never
      :
          | "UNAUTHORIZED"
          | (HasScopes<A> extends true ? ScopeErrorOf<A> : never)
          | (A extends { operator: true } ? "FORBIDDEN" : never)
          | (A extends { keyRefusal: string } ? "FORBIDDEN" : never));

/** The codes a handler of this auth spec and error map may raise with `ctx.fail`. */
export type RaisableCode<A extends AuthSpec, E> = (keyof E & ErrorCode) | ImpliedCode<A>;

/** Throws the `ServiceError` of a declared code; the message defaults to the declared one. */
export type Fail<C extends ErrorCode> = (code: C, message?: string, options?: ServiceErrorOptions) => never;

/**
 * The context of a method with this auth spec and these errors: authenticated methods see a
 * principal (no `!` needed), and `fail` takes only the codes the method declares or implies.
 * It is a `CallContext` too, so helpers typed with the domain's context take it as is.
 */
export type ContextFor<A extends AuthSpec, Deps = unknown, E = NoErrors> = CallContext<
  A extends "public" ? Principal | undefined : Principal,
  Deps
> & {
  fail: Fail<RaisableCode<A, E>>;
};

/** Framing of a streamed result over SSE. */
export interface StreamOptions {
  /** A last `data:` line after the stream ends, e.g. `[DONE]` for chat. */
  done?: string;
  /**
   * Each item's `type` is also its frame's `event:` name, as the Responses and Messages
   * dialects' typed events have it (docs/dialects.md).
   */
  named?: boolean;
}

type MaybePromise<T> = T | Promise<T>;

/** What a handler must return: the declared output's shape when there is one, or a stream, or a raw reply. */
export type HandlerReturn<O> = MaybePromise<(O extends v.GenericSchema ? v.InferInput<O> : unknown) | AsyncIterable<unknown> | RawReply>;

/** The fields of a declaration (`defineMethod`, `<domain>Domain.method`). */
export interface MethodDef<
  N extends string = string,
  TSchema extends v.GenericSchema = v.GenericSchema,
  A extends AuthSpec = AuthSpec,
  O extends v.GenericSchema | undefined = undefined,
  E extends ErrorMap = NoErrors,
  R = unknown,
  Deps = unknown,
> {
  /** Dotted lowercase `domain.noun.verb`, unique in the registry: `tenants.members.add`. */
  name: N;
  /**
   * Names the method had before a rename: `POST /rpc` still answers to them, deprecated, until
   * the next major version (docs/versioning.md "Renamed JSON-RPC methods").
   */
  formerNames?: readonly string[];
  summary: string;
  input: TSchema;
  /**
   * The result's shape (non-streamed), for the OpenAPI document; the handler's return type is
   * checked against it.
   */
  output?: O;
  auth: A;
  policies?: Policies;
  /**
   * The errors the handler itself raises, beyond those its auth and input imply: its OpenAPI
   * error responses and the codes `ctx.fail` accepts.
   */
  errors?: E;
  http: readonly HttpBinding[];
  /**
   * A gate for a transport that is not a REST binding (an MCP request, a socket upgrade):
   * reached only through the dispatcher by that transport, never over `/rpc` nor in OpenAPI.
   */
  internal?: boolean;
  stream?: StreamOptions;
  handler(params: v.InferOutput<TSchema>, ctx: ContextFor<A, Deps, E>): R;
}

/** A declared method as the registry, the dispatcher and the transports handle it, whatever its types. */
export interface AnyMethod {
  readonly name: string;
  readonly formerNames?: readonly string[];
  readonly summary: string;
  readonly input: v.GenericSchema;
  readonly output?: v.GenericSchema;
  readonly auth: AuthSpec;
  readonly policies?: Policies;
  readonly errors?: ErrorMap;
  readonly http: readonly HttpBinding[];
  readonly internal?: boolean;
  readonly stream?: StreamOptions;
  handler(params: unknown, ctx: CallContext): unknown;
  /** The domain module that declared it (rpc/module.ts `domain(name).method`); its deps reach the handler. */
  readonly domain?: string;
}

/**
 * A declared method with its types: its name, input schema, auth, output and errors, and the
 * result its handler returns. `dispatcher.call(method, params, facts)` reads them: the params
 * are the input schema's input, the result the handler's (held to the declared output).
 */
export interface Method<
  N extends string = string,
  TSchema extends v.GenericSchema = v.GenericSchema,
  A extends AuthSpec = AuthSpec,
  O extends v.GenericSchema | undefined = v.GenericSchema | undefined,
  E extends ErrorMap = ErrorMap,
  R = unknown,
> extends AnyMethod {
  readonly name: N;
  readonly input: TSchema;
  readonly output?: O;
  readonly auth: A;
  readonly errors?: E;
  /** Types only, never set at run time. */
  readonly "~types"?: { readonly params: v.InferInput<TSchema>; readonly result: Awaited<R> };
}

/** What `dispatcher.call(method, …)` takes as params: the input schema's input (before defaults and transforms). */
export type MethodParams<M extends AnyMethod> = M extends { readonly "~types"?: { readonly params: infer P } } ? P : unknown;

/** What `dispatcher.call(method, …)` resolves to: what the handler returns (a stream when it streams). */
export type MethodResult<M extends AnyMethod> = M extends { readonly "~types"?: { readonly result: infer R } } ? R : unknown;

/**
 * How the `errors` field is checked: a map whose keys are error codes (a misspelt code is an
 * error, and so is a list of codes).
 */
export type ErrorsField<E> = E & { readonly [K in Exclude<keyof E, ErrorCode>]: never } & { readonly length?: never };

/** Declares one operation; the facade, JSON-RPC and OpenAPI are generated from it. */
export function defineMethod<
  const N extends string,
  TSchema extends v.GenericSchema,
  const A extends AuthSpec,
  O extends v.GenericSchema | undefined = undefined,
  const E extends ErrorMap = NoErrors,
  R extends HandlerReturn<O> = HandlerReturn<O>,
>(def: MethodDef<N, TSchema, A, O, E, R> & { errors?: ErrorsField<E> }): Method<N, TSchema, A, O, E, R> {
  return def as unknown as Method<N, TSchema, A, O, E, R>;
}

export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}
