import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { ClientCapabilities, Implementation, LoggingLevel, RequestId } from "@modelcontextprotocol/sdk/types.js";

/**
 * Every use the gateway makes of fields the MCP SDK keeps private, in one place. They are
 * fields of the SDK's compiled classes, not its API: a release may rename or reshape them
 * without notice. So the SDK is pinned to an exact version in package.json (`SDK_VERSION`
 * below), and test/bridge/sdk-internals.test.ts checks each field on real SDK objects — it
 * fails on an upgrade that changes any of them, before production does. No other file reads
 * or writes an SDK field whose name starts with `_`.
 */

/** The SDK release these fields were read from; package.json pins exactly this version. */
export const SDK_VERSION = "1.32.2";

/** `Protocol._requestHandlerAbortControllers`: the running handlers' abort controllers, which `notifications/cancelled` aborts. */
type Cancellable = { _requestHandlerAbortControllers: Map<RequestId, AbortController> };

/**
 * The map where the SDK's `Protocol` looks up a running request on `notifications/cancelled`:
 * a request answered outside the SDK's handlers (bridge/mcp/endpoint.ts plain `tools/call`)
 * registers its controller here so a client's cancellation still aborts it.
 */
export function requestHandlerAborts(server: Server): Map<RequestId, AbortController> {
  return (server as unknown as Cancellable)._requestHandlerAbortControllers;
}

/** `Server._loggingLevels`: the level each session set with `logging/setLevel`, by session id. */
type LoggingLevels = { _loggingLevels?: Map<string | undefined, LoggingLevel> };

/** The level the session set with `logging/setLevel`, if any (the SDK has no getter for it). */
export function loggingLevelOf(server: Server | undefined, sessionId: string | undefined): LoggingLevel | undefined {
  return (server as unknown as LoggingLevels | undefined)?._loggingLevels?.get(sessionId);
}

/**
 * Records a session's level where the SDK's `sendLoggingMessage` filters by it: the gateway
 * answers `logging/setLevel` with its own handler (the SDK's records the level under the
 * transport's session id only when its own handler runs).
 */
export function setLoggingLevelOf(server: Server, sessionId: string | undefined, level: LoggingLevel): void {
  (server as unknown as LoggingLevels)._loggingLevels?.set(sessionId, level);
}

/** One entry of the web-standard server transport's `_streamMapping`. */
export interface SdkStream {
  /** Set while the stream is an open SSE stream. */
  controller?: unknown;
  /** Set while a JSON answer is being gathered. */
  resolveJson?: unknown;
}

/** The web-standard server transport's bookkeeping of answer streams. */
export interface TransportStreams {
  /** `_streamMapping`: answer streams (SSE or JSON) by stream id. */
  streams: Map<string, SdkStream>;
  /** `_requestToStreamMapping`: the stream each request is answered on. */
  requestStreams: Map<RequestId, string>;
}

type TransportInternals = {
  _streamMapping: Map<string, SdkStream>;
  _requestToStreamMapping: Map<RequestId, string>;
};

/** The transport's stream maps (bridge/mcp/internal/json-transport.ts repairs a leak in them). */
export function transportStreams(transport: WebStandardStreamableHTTPServerTransport): TransportStreams {
  const internals = transport as unknown as TransportInternals;
  return { streams: internals._streamMapping, requestStreams: internals._requestToStreamMapping };
}

/** The id of the session's GET stream in `_streamMapping` (the transport's `_standaloneSseStreamId`). */
export const STANDALONE_STREAM = "_GET_stream";

/**
 * Makes the transport's `_enableJsonResponse` flag (read where it picks a POST's answer form
 * and where `send` writes) follow `json`; the SDK's own writes to it are ignored.
 */
export function bindJsonResponseFlag(transport: WebStandardStreamableHTTPServerTransport, json: () => boolean): void {
  Object.defineProperty(transport, "_enableJsonResponse", { get: json, set: () => undefined, configurable: true });
}

/** The web-standard server transport's session state: `sessionId` is public, `_initialized` is not. */
type SessionState = { _initialized: boolean; sessionId?: string };

/**
 * Puts a fresh transport in the state its `initialize` would have left it in, for session `id`
 * (bridge/mcp/resume.ts: a session opened on another instance, rebuilt here from its id). The
 * SDK has no API for it: `sessionIdGenerator` runs only on an `initialize` request, which is
 * also the only place `_initialized` is set.
 */
export function markInitialized(transport: WebStandardStreamableHTTPServerTransport, id: string): void {
  const state = transport as unknown as SessionState;
  state.sessionId = id;
  state._initialized = true;
}

/** `Server._clientCapabilities` and `_clientVersion`: what `initialize` recorded of the client. */
type ClientState = { _clientCapabilities?: ClientCapabilities; _clientVersion?: Implementation };

/**
 * Records what the client declared at `initialize` on a server that never saw it (a session
 * rebuilt on another instance): `getClientCapabilities()` and `getClientVersion()` answer it,
 * and the SDK's capability checks on requests to the client read it.
 */
export function setClientOf(server: Server, capabilities: ClientCapabilities, clientInfo: Implementation): void {
  const state = server as unknown as ClientState;
  state._clientCapabilities = capabilities;
  state._clientVersion = clientInfo;
}

/** `Protocol._responseHandlers`: the requests this side sent and still waits an answer for, by id. */
type Awaiting = { _responseHandlers: Map<number, unknown> };

/** Whether `server` sent the request `id` answers and still waits for it (the SDK has no getter). */
export function awaitsResponse(server: Server, id: unknown): boolean {
  return typeof id === "number" && (server as unknown as Awaiting)._responseHandlers.has(id);
}
