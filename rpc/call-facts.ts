import { randomUUID } from "node:crypto";
import type { Presented, Principal } from "./auth.js";
import type { SetCookie } from "./cookies.js";
import type { AnyMethod, ProgressUpdate } from "./define.js";
import type { ClientRelay } from "./relay.js";
import type { CallSurface } from "./surfaces.js";

/** How a call reached the dispatcher (a label of the per-call metric and log line). */
export type CallTransport = "rest" | "rpc" | "mcp" | "socket" | "direct";

/** What a transport knows about one call: the facts, never the decisions. */
export interface CallFacts {
  requestId: string;
  surface: CallSurface;
  /** How the call came in; `direct` when code calls the dispatcher itself. */
  transport?: CallTransport;
  presented: Presented;
  signal: AbortSignal;
  /** A sink for response metadata (headers), error or not. */
  responseHeaders: Headers;
  ip: string;
  /** The caller's W3C `traceparent`, when it sent a well-formed one. */
  traceparent?: string;
  /**
   * The fields of the transport's own log line, written once the call is over: the call's
   * method, outcome and duration join it (`calls`), as do a handler's fields (chat: model,
   * tokens). Without it the dispatcher writes one line for the call.
   */
  logFields?: Record<string, unknown>;
  /** Told who the caller is once authenticated (a socket keeps it for its later messages). */
  onAuthenticated?(principal: Principal, method: AnyMethod): void;
  /**
   * The caller as a gate method already authenticated it within this same request (MCP: one
   * HTTP request, admitted by `bridge.mcp.connect`, carries the tools/call): held to this
   * method's credential kinds and scopes instead of being looked up again.
   */
  authenticated?: Principal;
  /** The caller listens for progress of this call (MCP `_meta.progressToken`). */
  onProgress?(update: ProgressUpdate): void;
  /** The MCP client session behind the call, for an upstream server's sampling, elicitation and roots requests. */
  relay?: ClientRelay;
  /** Sets a cookie on the answer (HTTP transports: facade/transport/cookies.ts). */
  setCookie?: SetCookie;
  /** Whether the answer reached the socket in full (REST on Node); see CallContext.delivered. */
  delivered?(): Promise<boolean>;
}

/** The facts a transport must name; everything else has a default. */
export type CallFactsInit = Partial<CallFacts> & Pick<CallFacts, "surface"> & { transport: CallTransport };

// A call nobody can cancel (a socket's cancel message, a test) gets this signal.
const NEVER_ABORTED = new AbortController().signal;

/**
 * The one way to build the facts of a call (every call site of `dispatcher.dispatch`): a new
 * request id unless the transport has one, no credentials unless presented, a signal that never
 * aborts, a fresh header sink and an unknown address.
 */
export function callFacts(init: CallFactsInit): CallFacts {
  const facts: CallFacts = {
    requestId: init.requestId ?? randomUUID(),
    surface: init.surface,
    transport: init.transport,
    presented: init.presented ?? {},
    signal: init.signal ?? NEVER_ABORTED,
    responseHeaders: init.responseHeaders ?? new Headers(),
    ip: init.ip ?? "",
  };
  if (init.traceparent !== undefined) facts.traceparent = init.traceparent;
  if (init.logFields) facts.logFields = init.logFields;
  if (init.onAuthenticated) facts.onAuthenticated = init.onAuthenticated;
  if (init.authenticated) facts.authenticated = init.authenticated;
  if (init.onProgress) facts.onProgress = init.onProgress;
  if (init.relay) facts.relay = init.relay;
  if (init.setCookie) facts.setCookie = init.setCookie;
  if (init.delivered) facts.delivered = init.delivered;
  return facts;
}
