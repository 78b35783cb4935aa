import type { IncomingMessage } from "node:http";
import type { H3 } from "h3";
import { RawReply, isAsyncIterable, type AnyMethod, type HttpBinding, type RawRequest } from "../rpc/define.js";
import { callFacts, fromWire, type CallFacts, type Dispatcher } from "../rpc/dispatcher.js";
import type { Presented } from "../rpc/auth.js";
import { ServiceError } from "../rpc/errors.js";
import { wireTextOf } from "../rpc/wire-text.js";
import { readDeclaredJsonBody, readJsonBody, readRawBody } from "./transport/body.js";
import { instrument, jsonResponse, scopeFacts, type RequestScope } from "./transport/instrument.js";
import { cookieWriter } from "./transport/cookies.js";
import { toSseResponse } from "./transport/sse.js";
import { SURFACE_BASES, SURFACES, renderError } from "../rpc/surfaces.js";
import { presentedFor } from "./transport/surfaces.js";

const WITH_BODY = new Set(["POST", "PUT", "PATCH"]);

export interface MountedRoute {
  method: string;
  path: string;
  pattern: RegExp;
}

export function fullPath(binding: HttpBinding): string {
  return SURFACE_BASES[binding.surface] + binding.path;
}

function decodeParams(params: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(params ?? {})) {
    try {
      out[name] = decodeURIComponent(value);
    } catch {
      throw new ServiceError("BAD_REQUEST", `Malformed path parameter: ${name}`);
    }
  }
  return out;
}

/**
 * Mounts every REST binding of every method. Params are the query, the JSON body and the path
 * parameters merged (path wins), validated by the method's schema in the dispatcher.
 */
export function mountRest(app: H3, dispatcher: Dispatcher): MountedRoute[] {
  const routes: MountedRoute[] = [];
  const { config } = dispatcher.ports;
  for (const method of Object.values(dispatcher.registry)) {
    if (method.internal) continue;
    for (const binding of method.http) {
      const path = fullPath(binding);
      routes.push({
        method: binding.method,
        path,
        pattern: new RegExp(`^${path.replace(/\*\*:\w+/g, ".+").replace(/:\w+/g, "[^/]+")}/?$`),
      });
      app.on(
        binding.method,
        path,
        instrument(
          binding.surface,
          dispatcher.ports,
          (event, scope) =>
            handleRest(event.req, event.context.params, method, binding, dispatcher, scope, config.GATEWAY_MAX_PAYLOAD_BYTES),
          binding.dialect,
        ),
      );
    }
  }
  return routes;
}

/**
 * Where one REST call comes from: through h3 (a web Request) or served without it
 * (facade/native-routes.ts: the Node request, whose declared Content-Length was checked).
 * Both doors run the same serveRest() and read bodies with the same restJsonBody().
 */
export interface RestInput {
  header(name: string): string | null | undefined;
  presented: Presented;
  /** The JSON body (undefined when empty), read only once the caller is authenticated. */
  json(): Promise<unknown>;
  /** The query's parameters. */
  query(): Record<string, string>;
  pathParams?: Record<string, string>;
  /** The request as a raw method receives it (bindings with `raw`; h3 only). */
  raw?(): Promise<Record<string, unknown>>;
}

/** The body a REST call is read from, by front door. */
export type RestBody = { request: Request; limit: number } | { node: IncomingMessage; declared: number };

/**
 * The one reader of REST JSON bodies: undefined when empty, 413 past the limit, 400 for a body
 * that is not JSON, PARSE_ERROR for malformed JSON, 400 past the depth bound or for a body that
 * stopped arriving. A web Request is read by readJsonBody, which reads a Node request's
 * declared body from the Node request's own events — as a Node request served without h3 is read.
 */
export function restJsonBody(body: RestBody): Promise<unknown> {
  return "node" in body ? readDeclaredJsonBody(body.node, body.declared) : readJsonBody(body.request, body.limit);
}

/**
 * One REST call, whichever door it came through: its facts, its params (the query, the JSON
 * body and the path parameters merged, path wins, read only once the caller is authenticated),
 * the dispatcher, and its answer (replyOf).
 */
export async function serveRest(
  input: RestInput,
  method: AnyMethod,
  binding: HttpBinding,
  dispatcher: Dispatcher,
  scope: RequestScope,
): Promise<Response> {
  scope.log.operation = method.name;
  const facts = restFacts(scope, binding, input.presented);
  const readParams = async () =>
    restParams(binding, WITH_BODY.has(binding.method) ? await input.json() : undefined, input.query(), input.header, input.pathParams);
  const result = await dispatcher.call(method, fromWire(binding.raw && input.raw ? input.raw : readParams), facts);
  return replyOf(result, method, binding, dispatcher, scope, input.header);
}

async function handleRest(
  request: Request,
  pathParams: Record<string, string> | undefined,
  method: AnyMethod,
  binding: HttpBinding,
  dispatcher: Dispatcher,
  scope: RequestScope,
  limit: number,
): Promise<Response> {
  const header = (name: string) => request.headers.get(name);
  const input: RestInput = {
    header,
    presented: presentedFor(binding.surface, request, binding.dialect),
    json: () => restJsonBody({ request, limit }),
    query: () => {
      const query: Record<string, string> = {};
      for (const [name, value] of new URL(request.url).searchParams) query[name] = value;
      return query;
    },
    ...(pathParams ? { pathParams } : {}),
    raw: async () => {
      const headers: Record<string, string> = {};
      request.headers.forEach((value, name) => {
        headers[name] = value;
      });
      const body = WITH_BODY.has(binding.method) || binding.method === "DELETE" ? await readRawBody(request, limit) : undefined;
      const raw: RawRequest = { method: binding.method, search: new URL(request.url).search, headers, ...(body ? { body } : {}) };
      return { ...decodeParams(pathParams), request: raw };
    },
  };
  return serveRest(input, method, binding, dispatcher, scope);
}

/** The facts of a REST call (through h3 or served without it: facade/native-routes.ts). */
export function restFacts(scope: RequestScope, binding: HttpBinding, presented: Presented): CallFacts {
  return callFacts({
    ...scopeFacts(scope),
    surface: binding.surface,
    transport: "rest",
    presented,
    setCookie: cookieWriter(scope.responseHeaders),
    ...(scope.delivered ? { delivered: scope.delivered } : {}),
  });
}

/**
 * A REST call's params: the query, then the binding's header params the query does not name,
 * the JSON body (which must be an object) over them, and the path parameters over all.
 */
export function restParams(
  binding: HttpBinding,
  body: unknown,
  query: Record<string, string>,
  header: (name: string) => string | null | undefined,
  pathParams?: Record<string, string>,
): Record<string, unknown> {
  if (body !== undefined && (typeof body !== "object" || body === null || Array.isArray(body))) {
    throw new ServiceError("BAD_REQUEST", "Request body must be a JSON object");
  }
  if (binding.queryParams) {
    const read: Record<string, string> = {};
    for (const [name, param] of Object.entries(binding.queryParams)) if (query[name] !== undefined) read[param] = query[name];
    query = read;
  }
  for (const [name, param] of Object.entries(binding.headerParams ?? {})) {
    const value = header(name);
    if (value != null && query[param] === undefined) query[param] = value;
  }
  return { ...query, ...(body as Record<string, unknown> | undefined), ...decodeParams(pathParams) };
}

/**
 * A call's result as the route's answer: a raw reply as it is, a stream as server-sent events
 * (the log line and metrics wait for its end), nothing as 204, a conditional GET whose ETag
 * still matches as 304, anything else as JSON with the binding's status.
 */
export function replyOf(
  result: unknown,
  method: AnyMethod,
  binding: HttpBinding,
  dispatcher: Dispatcher,
  scope: RequestScope,
  header: (name: string) => string | null | undefined,
): Response {
  if (result instanceof RawReply) {
    const headers = new Headers(scope.responseHeaders);
    result.headers.forEach((value, name) => {
      headers.set(name, value);
    });
    return new Response(result.body as ConstructorParameters<typeof Response>[0], { status: result.status, headers });
  }
  if (isAsyncIterable(result)) {
    return toSseResponse(result, {
      done: method.stream?.done,
      named: method.stream?.named,
      headers: scope.responseHeaders,
      abort: scope.abort,
      // The request's log line and metrics wait for the stream's end (tokens, full duration).
      onEnd: scope.defer(),
      plain: !SURFACES[binding.surface].serviceHeaders,
      errorFrame: (error) => renderError(binding.surface, error, scope.requestId, dispatcher.ports.log, undefined, binding.dialect).body,
      wireText: wireTextOf,
    });
  }
  if (result === undefined) return new Response(null, { status: 204, headers: scope.responseHeaders });
  // A conditional GET whose ETag (set by the method) still matches: 304 without a body (RFC 9110 13.1.2).
  const etag = scope.responseHeaders.get("etag");
  if (etag && binding.method === "GET" && ifNoneMatch(header("if-none-match") ?? null, etag)) {
    return new Response(null, { status: 304, headers: scope.responseHeaders });
  }
  return jsonResponse(result, binding.status ?? 200, scope.responseHeaders);
}

function ifNoneMatch(header: string | null, etag: string): boolean {
  if (!header) return false;
  const weak = (tag: string) => tag.trim().replace(/^W\//, "");
  return header.split(",").some((tag) => tag.trim() === "*" || weak(tag) === weak(etag));
}
