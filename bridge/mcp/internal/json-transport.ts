import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isJSONRPCErrorResponse, isJSONRPCRequest, isJSONRPCResultResponse, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import { bindJsonResponseFlag, STANDALONE_STREAM, transportStreams } from "../sdk-internals.js";

/**
 * Set by the endpoint on a request whose client listed only `application/json` (it adds
 * `text/event-stream` for the SDK): such a request is never answered with an SSE stream.
 */
export const JSON_ONLY_HEADER = "x-gateway-json-only";

/** A POST carrying a request with `_meta.progressToken`: its progress must reach the client before the reply. */
function asksProgress(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some(
    (message) =>
      isJSONRPCRequest(message) && (message.params?._meta as { progressToken?: unknown } | undefined)?.progressToken !== undefined,
  );
}

/** A POST carrying a `tools/call`, during which the upstream server may ask the client something. */
function callsTool(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some((message) => isJSONRPCRequest(message) && message.method === "tools/call");
}

/**
 * The SDK's web-standard transport in JSON-response mode, minus a leak: SDK 1.32.2 resolves a
 * JSON reply but never drops the reply's entry from its stream map (only SSE replies clean
 * up), so every POST left a few KiB behind for the life of the session. Once a JSON reply has
 * gone out and no request still waits on it, its entry is removed here.
 */
export class JsonResponseTransport extends WebStandardStreamableHTTPServerTransport {
  /**
   * JSON mode, except for a POST asking for progress: that one is answered with an SSE stream
   * carrying its `notifications/progress` and then its reply, in order. The SDK reads its
   * JSON-response flag (bound here by sdk-internals.ts) synchronously where it picks a POST's answer form and where
   * `send` writes to a stream (no event store here), so the flag is switched around those
   * synchronous sections only: never across an `await`, never seen by another request.
   */
  #sse = false;

  /**
   * Set by the endpoint: the session's client declared sampling, elicitation or roots, so a
   * `tools/call` is answered with an SSE stream that can carry the upstream server's requests
   * to the client (bridge/mcp/client-relay.ts) before the reply.
   */
  streamsCalls: (() => boolean) | undefined;

  constructor(...args: ConstructorParameters<typeof WebStandardStreamableHTTPServerTransport>) {
    super(...args);
    bindJsonResponseFlag(this, () => !this.#sse);
  }

  override handleRequest(
    request: Request,
    options?: Parameters<WebStandardStreamableHTTPServerTransport["handleRequest"]>[1],
  ): Promise<Response> {
    const body = options?.parsedBody;
    this.#sse =
      request.method === "POST" &&
      !request.headers.has(JSON_ONLY_HEADER) &&
      (asksProgress(body) || (this.streamsCalls?.() === true && callsTool(body)));
    try {
      return super.handleRequest(request, options);
    } finally {
      this.#sse = false;
    }
  }

  override async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const { streams, requestStreams } = transportStreams(this);
    const isReply = isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message);
    const streamId = isReply && message.id !== undefined ? requestStreams.get(message.id) : undefined;
    const related = isReply ? message.id : options?.relatedRequestId;
    const relatedStream = related === undefined ? undefined : requestStreams.get(related);
    this.#sse = relatedStream !== undefined && streams.get(relatedStream)?.controller !== undefined;
    if (isJSONRPCRequest(message) && relatedStream !== undefined && !this.#sse) {
      // A request to the client during a call answered as one JSON body (the client accepts JSON
      // only) goes on the session's GET stream; the SDK would drop it silently otherwise.
      this.#sse = false;
      if (!streams.get(STANDALONE_STREAM)?.controller) {
        throw new Error(
          "The client has no stream open to receive the request: accept text/event-stream on the call, or open the session's GET stream",
        );
      }
      return super.send(message);
    }
    let sent: Promise<void>;
    try {
      sent = super.send(message, options);
    } finally {
      this.#sse = false;
    }
    await sent;
    if (streamId === undefined || !streams.get(streamId)?.resolveJson) return;
    for (const waiting of requestStreams.values()) if (waiting === streamId) return;
    streams.delete(streamId);
  }

  /** Replies still held by the transport (for leak tests). */
  get heldReplies(): number {
    let held = 0;
    for (const entry of transportStreams(this).streams.values()) if (entry.resolveJson) held += 1;
    return held;
  }
}
