import { randomUUID } from "node:crypto";
import type { H3, H3Event } from "h3";
import {
  ErrorCode,
  type InitializeRequest,
  isInitializeRequest,
  isJSONRPCErrorResponse,
  isJSONRPCResultResponse,
  LATEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/sdk/types.js";
import { FastResponse } from "srvx";
import type { Principal } from "../../rpc/auth.js";
import { callFacts, type Dispatcher } from "../../rpc/dispatcher.js";
import { isServiceError, ServiceError } from "../../rpc/errors.js";
import type { CorePorts } from "../../rpc/module.js";
import { readJsonBody } from "../../facade/transport/body.js";
import { instrument, jsonResponse, scopeFacts, type RequestScope } from "../../facade/transport/instrument.js";
import { allowedOrigins, assertOrigin } from "../../facade/transport/origin.js";
import { SURFACE_BASES } from "../../rpc/surfaces.js";
import { presentedFor } from "../../facade/transport/surfaces.js";
import { JSON_ONLY_HEADER, JsonResponseTransport } from "./internal/json-transport.js";
import { challenge, METADATA_ROUTES, protectedResourceMetadata, publicOrigin } from "./metadata.js";
import { mcpResource } from "../../rpc/credentials/oauth-resource.js";
import { issuerOf, nodeRequestOf } from "../oauth/origins.js";
import { McpSessions, type McpSession } from "./sessions.js";
import { createToolServer, runToolCall, type McpServerOptions } from "./tool-server.js";
import { declaresClientFeatures, sessionLink } from "./client-relay.js";
import { markInitialized, requestHandlerAborts, setClientOf } from "./sdk-internals.js";
import { openSessionId, sealSessionId, sessionNonce, type SessionClaims } from "./session-id.js";
import { McpEndedSessionsRepo } from "../../storage/repos/mcp-ended-sessions.js";
import type { ClientSessionLink } from "../upstream/client-session.js";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { scopeOfPrincipal } from "../../rpc/tools/visible-tools.js";
import { bridgeMcpCapabilities, bridgeMcpConnect } from "../../rpc/tools/methods.js";
import type { Transport } from "../../facade/transport/mount.js";
import type { ToolBridge } from "../tool-bridge.js";
import { isObject } from "../../rpc/validate.js";

/**
 * docs/interface.md 4.5: `POST /mcp/mcp/` on the bridge, which a deployment may rewrite to `/mcp/`; both
 * answer, with and without the trailing slash.
 */
export const MCP_PATHS = [
  `${SURFACE_BASES.bridge}/mcp/mcp/`,
  `${SURFACE_BASES.bridge}/mcp/mcp`,
  `${SURFACE_BASES.bridge}/mcp/`,
  `${SURFACE_BASES.bridge}/mcp`,
];

/**
 * One upstream server's own endpoint (docs/mcp.md "One endpoint per upstream server"): its
 * tools, resources and prompts with their original names, for its tenant (or everyone, shared).
 */
export const MCP_SERVER_PATHS = [`${SURFACE_BASES.bridge}/mcp/servers/:name/`, `${SURFACE_BASES.bridge}/mcp/servers/:name`];

const SESSION_HEADER = "mcp-session-id";

/**
 * How long a session id is accepted (at least MCP_SESSION_IDLE_SECONDS): an id carries its
 * session (docs/mcp.md "Sessions on any instance"), so no instance can tell how long it sat
 * idle elsewhere; past this its client initializes again.
 */
const SESSION_LIFETIME_SECONDS = 24 * 3600;

/** Bus channel: a session ended (DELETE) on some instance; every other drops its copy. */
const ENDED_CHANNEL = "mcp.session.ended";

/** What opening and resuming sessions need of the endpoint. */
interface SessionContext {
  dispatcher: Dispatcher;
  sessions: McpSessions;
  bridge: ToolBridge;
  ended: McpEndedSessionsRepo;
  lifetimeSeconds: number;
}

const sessionNotFound = () => new ServiceError("NOT_FOUND", "Session not found; it ended or never existed: initialize a new one");

// The session table of each running service set (several servers may share one process in tests).
const tables = new WeakMap<CorePorts, McpSessions>();

/** This instance's open MCP sessions (health checks, tests). */
export function mcpSessionsOf(services: CorePorts): McpSessions | undefined {
  return tables.get(services);
}

/**
 * Admits one MCP request through the dispatcher (`bridge.mcp.connect`: credentials and the
 * bridge rate limit), returning its principal. A 401 points the client at the protected-resource
 * metadata (RFC 9728 §5.1).
 */
async function principalOfRequest(
  event: H3Event,
  request: Request,
  dispatcher: Dispatcher,
  scope: RequestScope,
  upstream: string | undefined,
): Promise<Principal> {
  const { config } = dispatcher.ports;
  const origin = publicOrigin(config, request);
  try {
    let principal: Principal | undefined;
    // An access token of the authorization server is taken for this endpoint only: its canonical
    // URL is the audience (docs/mcp.md "The bridge as a resource server").
    const audience = { resource: mcpResource(origin, upstream), issuer: issuerOf(config, nodeRequestOf(event)) };
    // A server's own endpoint also checks the caller sees that server (the same 404 otherwise).
    await dispatcher.call(
      bridgeMcpConnect,
      upstream === undefined ? {} : { server: upstream },
      callFacts({
        ...scopeFacts(scope),
        surface: "bridge",
        transport: "mcp",
        presented: { ...presentedFor("bridge", request), oauthAudience: audience },
        onAuthenticated: (who) => (principal = who),
      }),
    );
    return principal!;
  } catch (error) {
    if (!isServiceError(error)) throw error;
    const discovery = config.OAUTH_DISCOVERY;
    if (error.status === 401) {
      // RFC 9728 §5.1: point the client at the protected-resource metadata.
      const invalid = (error.details as { reason?: string } | undefined)?.reason === "invalid";
      throw new ServiceError("UNAUTHORIZED", error.message, {
        details: error.details,
        headers: {
          "www-authenticate": challenge(origin, {
            discovery,
            ...server(upstream),
            ...(invalid ? { error: "invalid_token" as const } : {}),
          }),
        },
      });
    }
    if (error.status === 403 && (error.details as { required?: unknown } | undefined)?.required !== undefined)
      throw insufficientScope(origin, discovery, upstream);
    throw error;
  }
}

const server = (upstream: string | undefined) => (upstream === undefined ? {} : { server: upstream });

/** 403 `insufficient_scope` naming every scope the request needs, for a step-up authorization (MCP "Scope Challenge Handling"). */
function insufficientScope(origin: string, discovery: boolean, upstream: string | undefined): ServiceError {
  const description = "This access token does not allow calling tools: authorize again with mcp:call";
  return new ServiceError("FORBIDDEN", description, {
    details: { reason: "insufficient_scope", required: ["mcp:read", "mcp:call"] },
    headers: { "www-authenticate": challenge(origin, { discovery, ...server(upstream), error: "insufficient_scope", description }) },
  });
}

/** True when the POSTed message (or batch) holds a `tools/call`. */
function callsTools(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some((message) => isObject(message) && message.method === "tools/call");
}

/** What the MCP server for this caller declares besides tools (resources, prompts), asked through the dispatcher. */
async function offersFor(
  dispatcher: Dispatcher,
  principal: Principal,
  scope: RequestScope,
  upstream: string | undefined,
): Promise<McpServerOptions> {
  const offers = await dispatcher.call(
    bridgeMcpCapabilities,
    upstream === undefined ? {} : { server: upstream },
    callFacts({ ...scopeFacts(scope), surface: "bridge", transport: "mcp", authenticated: principal, responseHeaders: new Headers() }),
  );
  return { offers, ...(upstream === undefined ? {} : { upstream }) };
}

/**
 * The MCP endpoint (Streamable HTTP, protocol 2025-11-25 and the older revisions the SDK
 * speaks): one low-level SDK `Server` + `WebStandardStreamableHTTPServerTransport` per session,
 * sessions bound to the user who opened them, tools from the catalog, and
 * `notifications/tools/list_changed` on every catalog change. The same handler serves the
 * whole catalog (MCP_PATHS) and each upstream server's own endpoint (MCP_SERVER_PATHS).
 */
export function mcpTransport(bridge: ToolBridge): Transport {
  return (app, dispatcher) => mountMcp(app, dispatcher, bridge);
}

function mountMcp(app: H3, dispatcher: Dispatcher, bridge: ToolBridge): void {
  const services = dispatcher.ports;
  const { config } = services;
  // docs/interface.md 8 GATEWAY_CORS_ORIGINS doubles as the Origin allowlist (MCP "Security Warning": DNS rebinding).
  const origins = allowedOrigins(config);
  const ended = new McpEndedSessionsRepo(services.store.atomic);
  // Names this endpoint on the bus: the end of a session it announced is not its news.
  const instance = randomUUID();
  const sessions = new McpSessions(
    bridge.catalog,
    config.MCP_SESSION_IDLE_SECONDS,
    config.MCP_MAX_SESSIONS_PER_USER,
    (id) => bridge.upstream.release(id),
    // Past MCP_MAX_SESSIONS_PER_USER: the evicted session is refused everywhere, as a deleted one.
    (session) => void endEverywhere(session),
    services.store.bus,
  );
  const endEverywhere = async (session: McpSession) => {
    await ended
      .end(session.claims.nonce, session.claims.expiresAt * 1000 - Date.now())
      .catch((error: unknown) => services.log.warn({ event: "mcp.session", msg: "could not record an ended MCP session", error }));
    await services.store.bus.publish(ENDED_CHANNEL, { id: session.id, from: instance }).catch(() => undefined);
  };
  tables.set(services, sessions);
  services.onClose(() => sessions.close());
  const context: SessionContext = {
    dispatcher,
    sessions,
    bridge,
    ended,
    lifetimeSeconds: Math.max(SESSION_LIFETIME_SECONDS, config.MCP_SESSION_IDLE_SECONDS),
  };
  // A session ended on another instance: this instance's copy of it goes too.
  const endedHere = services.store.bus.subscribe(ENDED_CHANNEL, (message) => {
    if (!isObject(message) || message.from === instance) return;
    if (typeof message.id === "string") void sessions.end(message.id);
  });
  endedHere.catch((error: unknown) => services.log.warn({ event: "mcp.bus", msg: "no subscription to ended MCP sessions", error }));
  services.onClose(async () => (await endedHere.catch(() => undefined))?.());
  services.metrics.gauge("gateway_mcp_sessions", "MCP sessions open on this instance", () => sessions.size);

  const handle = instrument(
    "rpc",
    services,
    async (event, scope) => {
      scope.log.operation = "mcp";
      let request: Request = event.req;
      // undefined on the catalog's paths; the upstream server's name on its own endpoint.
      const upstream = (event.context.params as Record<string, string> | undefined)?.name;
      assertOrigin(request, origins);
      const sessionId = request.headers.get(SESSION_HEADER);
      // The session's claims (from this instance's copy, else from its id), and whether it was
      // ended anywhere, looked up while the credential is checked.
      const held = sessionId ? sessions.get(sessionId) : undefined;
      const claims = held?.claims ?? (sessionId ? openSessionId(bridge.secrets, sessionId) : undefined);
      const endedCheck = claims ? context.ended.isEnded(claims.nonce) : undefined;
      endedCheck?.catch(() => undefined);
      const principal = await principalOfRequest(event, request, dispatcher, scope, upstream);

      const version = request.headers.get("mcp-protocol-version");
      if (version !== null && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
        throw new ServiceError(
          "BAD_REQUEST",
          `Unsupported MCP-Protocol-Version ${version}; supported: ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")}`,
          {
            details: { supported: SUPPORTED_PROTOCOL_VERSIONS },
          },
        );
      }

      let parsedBody: unknown;
      if (request.method === "POST") {
        parsedBody = await readJsonBody(request, config.GATEWAY_MAX_PAYLOAD_BYTES);
        if (parsedBody === undefined) throw new ServiceError("PARSE_ERROR", "Request body must be a JSON-RPC message");
        // A token without mcp:call is challenged at the HTTP level, so its client can step up (MCP "Scope Challenge Handling").
        if (principal.kind === "oauth" && !principal.scopes.includes("mcp:call") && callsTools(parsedBody))
          throw insufficientScope(publicOrigin(config, request), config.OAUTH_DISCOVERY, upstream);
      }
      // One plain tools/call (no progress, no client features to relay): answered here without
      // the SDK's transport and Web streams (docs/benchmarks-bridge.md "MCP proxy").
      const plain = request.method === "POST" ? plainToolCall(request, parsedBody) : undefined;
      if (request.method === "POST" && !plain) request = acceptingJson(request);

      if (!sessionId) {
        if (plain) return answerToolCall(plain, principal, dispatcher, scope, upstream, undefined);
        const initializing =
          request.method === "POST" && (Array.isArray(parsedBody) ? parsedBody.some(isInitializeRequest) : isInitializeRequest(parsedBody));
        if (initializing) return openSession(context, request, parsedBody, principal, scope, upstream);
        // Plain JSON-RPC (docs/interface.md 2.7: `{jsonrpc, id, method: "tools/list"}` with bearer auth, perhaps
        // through a proxy that forwards JSON-RPC): answered statelessly, same catalog and limits.
        if (request.method === "POST") return answerStateless(request, parsedBody, principal, dispatcher, scope, upstream);
        throw new ServiceError(
          "BAD_REQUEST",
          "Mcp-Session-Id header is required for a GET stream; start a session with an initialize request",
        );
      }

      // A session of another user (or of another endpoint, or opened for another tenant by an
      // OAuth token), a forged or altered id, an expired or ended one: all answer as unknown.
      if (!claims || claims.userId !== principal.userId || claims.upstream !== upstream || claims.tenantId !== principal.tenantId)
        throw sessionNotFound();
      if (await endedCheck) {
        if (held) await sessions.end(held.id);
        throw sessionNotFound();
      }
      // Opened on another instance (or this one's copy expired): rebuilt from its id.
      const session = sessions.get(sessionId) ?? (await resumeSession(context, sessionId, claims, principal, scope));
      // Refused everywhere from now on: recorded before the answer, and the other instances told.
      if (request.method === "DELETE") await endEverywhere(session);
      session.principal = principal;
      session.requestId = scope.requestId;
      session.lastSeen = Date.now();
      // Answers to a request another instance sent the client (sampling, elicitation, roots
      // during a call there): sent to it over the bus, accepted here as the transport would.
      const answers = answersOnly(parsedBody);
      if (request.method === "POST" && answers && (await sessions.forwardAnswers(session, answers)))
        return withHeaders(new Response(null, { status: 202 }), scope);
      if (plain) {
        if (session.transport.streamsCalls?.() !== true) return answerToolCall(plain, principal, dispatcher, scope, upstream, session);
        request = acceptingJson(request);
      }
      const response = await session.transport.handleRequest(request, parsedBody === undefined ? undefined : { parsedBody });
      if (request.method === "GET" && response.status === 200 && response.body) {
        sessions.streamOpened(session);
        return withHeaders(
          onStreamEnd(response, () => sessions.streamClosed(session)),
          scope,
        );
      }
      return withHeaders(response, scope);
    },
    // JSON-RPC's error envelope, but counted and logged as their own surface.
    undefined,
    { label: "mcp" },
  );

  for (const path of [...MCP_PATHS, ...MCP_SERVER_PATHS]) app.all(path, handle);

  // docs/mcp.md "Discovery": with OAUTH_DISCOVERY off there is no metadata to find (404).
  if (!config.OAUTH_DISCOVERY) return;
  const metadata = (event: H3Event, name: string | undefined) =>
    jsonResponse(
      protectedResourceMetadata(publicOrigin(config, event.req), issuerOf(config, nodeRequestOf(event)), name),
      200,
      new Headers({ "cache-control": "max-age=3600" }),
    );
  // Clients that derive the well-known address from the full endpoint path, or try the root, find the catalog's.
  for (const path of METADATA_ROUTES.catalog) app.on("GET", path, (event) => metadata(event, undefined));
  // A server's own endpoint: served for any well-formed name, so the document tells nobody which names exist.
  for (const path of METADATA_ROUTES.server)
    app.on("GET", path, (event) => {
      const name = event.context.params?.name ?? "";
      if (!/^[A-Za-z0-9-]{1,48}$/.test(name)) throw new ServiceError("NOT_FOUND", "No such resource");
      return metadata(event, name);
    });
}

/** The session's SDK server and transport, and the session itself once it has an id. */
interface SessionParts {
  server: Server;
  transport: JsonResponseTransport;
  /** Makes the session (once its id is known) and adds it to this instance's table. */
  adopt(id: string, claims: SessionClaims): McpSession;
}

/** A server and transport for one session of `principal` (opened here or resumed from its id). */
async function sessionParts(
  context: SessionContext,
  principal: Principal,
  scope: RequestScope,
  upstream: string | undefined,
  sessionIdGenerator: () => string,
): Promise<SessionParts> {
  const { dispatcher, sessions, bridge } = context;
  const services = dispatcher.ports;
  const toolScope = await scopeOfPrincipal(services, principal);
  let session: McpSession | undefined;
  // A client that declared sampling, elicitation or roots gets upstream sessions of its own
  // (docs/mcp.md "Upstream sessions"); made once the session exists and the client is known.
  let link: ClientSessionLink | undefined;
  const server: Server = createToolServer(
    dispatcher,
    () => (session ? { principal: session.principal, requestId: session.requestId } : { principal, requestId: scope.requestId }),
    {
      ...(await offersFor(dispatcher, principal, scope, upstream)),
      link: () =>
        (link ??=
          session && declaresClientFeatures(server.getClientCapabilities())
            ? sessionLink(server, session, (notification) => sessions.deliver(session!, notification))
            : undefined),
      onSetLevel: (id, level) => bridge.upstream.setLevel(id, level),
      onRootsChanged: (id) => bridge.upstream.rootsChanged(id),
    },
  );
  const transport = new JsonResponseTransport({
    sessionIdGenerator,
    // Replies as one JSON body: tools/call has nothing to stream, and a plain response is
    // cheaper than an SSE stream per request. Notifications go on the GET stream.
    enableJsonResponse: true,
    maxRequestBodySize: services.config.GATEWAY_MAX_PAYLOAD_BYTES,
    onsessionclosed: (id) => sessions.delete(id),
  });
  server.onclose = () => {
    if (session) sessions.delete(session.id);
  };
  transport.streamsCalls = () => declaresClientFeatures(server.getClientCapabilities());
  await server.connect(transport);
  return {
    server,
    transport,
    adopt(id, claims) {
      session = {
        id,
        claims,
        userId: principal.userId,
        principal,
        requestId: scope.requestId,
        scope: toolScope,
        ...(upstream === undefined ? {} : { upstream }),
        server,
        transport,
        lastSeen: Date.now(),
        streamOpen: false,
        pendingListChanged: false,
      };
      sessions.add(session);
      return session;
    },
  };
}

/**
 * `initialize`: a new session whose id carries, sealed, what any instance needs to serve it
 * (bridge/mcp/session-id.ts): its user, endpoint, the negotiated protocol version and what the
 * client declared.
 */
async function openSession(
  context: SessionContext,
  request: Request,
  parsedBody: unknown,
  principal: Principal,
  scope: RequestScope,
  upstream: string | undefined,
): Promise<Response> {
  const initialize = (Array.isArray(parsedBody) ? parsedBody : [parsedBody]).find(isInitializeRequest) as InitializeRequest;
  const requested = initialize.params.protocolVersion;
  const claims: SessionClaims = {
    nonce: sessionNonce(),
    userId: principal.userId,
    ...(principal.tenantId === undefined ? {} : { tenantId: principal.tenantId }),
    ...(upstream === undefined ? {} : { upstream }),
    // As the SDK's Server negotiates it.
    protocolVersion: SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION,
    capabilities: initialize.params.capabilities,
    clientInfo: initialize.params.clientInfo,
    expiresAt: Math.floor(Date.now() / 1000) + context.lifetimeSeconds,
  };
  const id = sealSessionId(context.bridge.secrets, claims);
  // Clients and proxies keep headers to a few KiB; capabilities that big are not a real client's.
  if (id.length > MAX_SESSION_ID_CHARS)
    throw new ServiceError(
      "BAD_REQUEST",
      `The client's capabilities and clientInfo are too large for a session (over ${MAX_SESSION_ID_CHARS} characters sealed)`,
    );
  let session: McpSession | undefined;
  const parts = await sessionParts(context, principal, scope, upstream, () => id);
  // The transport names the session before the server handles initialize; adopted once it answered.
  const response = await parts.transport.handleRequest(request, { parsedBody });
  if (parts.transport.sessionId === id && response.status === 200) session = parts.adopt(id, claims);
  if (!session) await parts.server.close().catch(() => undefined);
  return withHeaders(response, scope);
}

/** The longest session id handed out (claims sealed, base64url). */
const MAX_SESSION_ID_CHARS = 8192;

/**
 * A session opened on another instance (or whose copy here expired): a fresh server and
 * transport in the state `initialize` left the original in, under the same id, with the
 * client's capabilities and clientInfo from the id's claims.
 */
async function resumeSession(
  context: SessionContext,
  id: string,
  claims: SessionClaims,
  principal: Principal,
  scope: RequestScope,
): Promise<McpSession> {
  const parts = await sessionParts(context, principal, scope, claims.upstream, () => id);
  markInitialized(parts.transport, id);
  setClientOf(parts.server, claims.capabilities, claims.clientInfo);
  // Another request of the same session may have rebuilt it meanwhile: one copy per instance.
  const raced = context.sessions.get(id);
  if (raced) {
    await parts.server.close().catch(() => undefined);
    return raced;
  }
  return parts.adopt(id, claims);
}

/**
 * This endpoint answers POSTs with one JSON body (never an SSE stream), so `Accept:
 * application/json` alone is enough: the SDK transport, which wants both types listed, is
 * handed the request with `text/event-stream` added.
 */
function acceptingJson(request: Request): Request {
  const accept = request.headers.get("accept") ?? "";
  if (/text\/event-stream/i.test(accept) && /application\/json/i.test(accept)) return request;
  if (accept && !/application\/json|\*\/\*/i.test(accept)) return request; // the transport answers 406
  const headers = new Headers(request.headers);
  headers.set("accept", "application/json, text/event-stream");
  headers.set(JSON_ONLY_HEADER, "1");
  return new Request(request.url, { method: request.method, headers, signal: request.signal });
}

/**
 * A POST without a session and without `initialize`: a server and transport for this one
 * request (the SDK's stateless mode), the same tool codec, closed when the answer is out
 * (after the SSE stream of a request asking for progress).
 */
async function answerStateless(
  request: Request,
  parsedBody: unknown,
  principal: Principal,
  dispatcher: Dispatcher,
  scope: RequestScope,
  upstream: string | undefined,
): Promise<Response> {
  const server = createToolServer(
    dispatcher,
    () => ({ principal, requestId: scope.requestId }),
    await offersFor(dispatcher, principal, scope, upstream),
  );
  const transport = new JsonResponseTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
    maxRequestBodySize: dispatcher.ports.config.GATEWAY_MAX_PAYLOAD_BYTES,
  });
  await server.connect(transport);
  let streaming = false;
  try {
    const response = await transport.handleRequest(request, { parsedBody });
    // A request asking for progress is answered with an SSE stream: the server lives until it ends.
    streaming =
      response.status === 200 && response.body !== null && (response.headers.get("content-type") ?? "").startsWith("text/event-stream");
    return withHeaders(streaming ? onStreamEnd(response, () => void server.close().catch(() => undefined)) : response, scope);
  } finally {
    if (!streaming) await server.close().catch(() => undefined);
  }
}

/** A POST of one `tools/call` the endpoint answers itself (see plainToolCall). */
interface PlainToolCall {
  id: string | number;
  params: { name: string; arguments?: Record<string, unknown> };
}

/**
 * The common case of `tools/call`, recognised exactly enough to answer it without the SDK's
 * server transport: one request (no batch), a string name, object arguments, no progress
 * token and nothing task-related, a JSON Content-Type and an Accept the JSON answer satisfies.
 * Anything else — and anything malformed, which the SDK answers with its own errors — goes the
 * SDK's way.
 */
function plainToolCall(request: Request, body: unknown): PlainToolCall | undefined {
  if (!isObject(body) || body.jsonrpc !== "2.0" || body.method !== "tools/call") return undefined;
  const { id, params } = body;
  if (!(typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id)))) return undefined;
  if (!isObject(params) || typeof params.name !== "string") return undefined;
  if (params.arguments !== undefined && !isObject(params.arguments)) return undefined;
  for (const key in params) if (key !== "name" && key !== "arguments" && key !== "_meta") return undefined;
  if (
    params._meta !== undefined &&
    (!isObject(params._meta) || Object.keys(params._meta).some((key) => key === "progressToken" || key.includes("related-task")))
  )
    return undefined;
  for (const key in body) if (key !== "jsonrpc" && key !== "id" && key !== "method" && key !== "params") return undefined;
  if (!/application\/json/i.test(request.headers.get("content-type") ?? "")) return undefined;
  const accept = request.headers.get("accept") ?? "";
  if (accept && !/application\/json|\*\/\*/i.test(accept)) return undefined;
  return { id, params: params as PlainToolCall["params"] };
}

/**
 * Answers a plain `tools/call` with one JSON body, written in one piece: the same codec as the
 * session's `Server` (runToolCall), the client's disconnect aborting the call, and in a session
 * the call registered where the SDK looks for `notifications/cancelled`, so a client's
 * cancellation still reaches the upstream server.
 */
async function answerToolCall(
  call: PlainToolCall,
  principal: Principal,
  dispatcher: Dispatcher,
  scope: RequestScope,
  upstream: string | undefined,
  session: McpSession | undefined,
): Promise<Response> {
  let signal = scope.abort.signal;
  let handlers: Map<string | number, AbortController> | undefined;
  let controller: AbortController | undefined;
  if (session) {
    controller = new AbortController();
    signal = controller.signal;
    handlers = requestHandlerAborts(session.server);
    handlers.set(call.id, controller);
    if (scope.abort.signal.aborted) controller.abort();
    else scope.abort.signal.addEventListener("abort", () => controller!.abort(), { once: true });
  }
  let message: Record<string, unknown>;
  try {
    const result = await runToolCall(
      dispatcher,
      () => ({ principal, requestId: scope.requestId }),
      upstream,
      session?.server,
      call.params,
      {
        signal,
        ...(session ? { sessionId: session.id } : {}),
        sendRequest: () => Promise.reject(new Error("No request can be relayed to this client")),
      },
    );
    message = { result, jsonrpc: "2.0", id: call.id };
  } catch (thrown) {
    // As the SDK's Protocol renders a handler's error.
    const error = thrown as Error & { code?: unknown; data?: unknown };
    message = {
      jsonrpc: "2.0",
      id: call.id,
      error: {
        code: Number.isSafeInteger(error.code) ? error.code : ErrorCode.InternalError,
        message: error.message ?? "Internal error",
        ...(error.data !== undefined ? { data: error.data } : {}),
      },
    };
  } finally {
    if (handlers && handlers.get(call.id) === controller) handlers.delete(call.id);
  }
  const headers = new Headers(scope.responseHeaders);
  headers.set("content-type", "application/json");
  if (session) headers.set(SESSION_HEADER, session.id);
  return new FastResponse(JSON.stringify(message), { status: 200, headers });
}

/** The POSTed messages when every one is a JSON-RPC result or error (the client answering the server). */
function answersOnly(body: unknown): { id?: unknown }[] | undefined {
  const messages = Array.isArray(body) ? body : [body];
  if (messages.length === 0) return undefined;
  for (const message of messages)
    if (!(isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) || typeof message.id !== "number") return undefined;
  return messages as { id?: unknown }[];
}

/** Adds the request id (and other scope headers) to the SDK's response. */
function withHeaders(response: Response, scope: RequestScope): Response {
  for (const [name, value] of scope.responseHeaders) response.headers.set(name, value);
  return response;
}

/** Passes an SSE body through, calling `onEnd` once when it finishes or the client goes away. */
function onStreamEnd(response: Response, onEnd: () => void): Response {
  const reader = response.body!.getReader();
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    onEnd();
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          end();
          controller.close();
        } else controller.enqueue(value);
      } catch (error) {
        end();
        controller.error(error);
      }
    },
    cancel(reason) {
      end();
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
}
