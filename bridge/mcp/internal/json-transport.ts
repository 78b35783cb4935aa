import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isJSONRPCErrorResponse, isJSONRPCResultResponse, type JSONRPCMessage, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";

/** The SDK transport's bookkeeping this class repairs (fields of SDK 1.32's compiled class). */
interface Internals {
  _streamMapping: Map<string, { resolveJson?: unknown }>;
  _requestToStreamMapping: Map<RequestId, string>;
}

/**
 * The SDK's web-standard transport in JSON-response mode, minus a leak: SDK 1.32.2 resolves a
 * JSON reply but never drops the reply's entry from its stream map (only SSE replies clean
 * up), so every POST left a few KiB behind for the life of the session. Once a JSON reply has
 * gone out and no request still waits on it, its entry is removed here.
 */
export class JsonResponseTransport extends WebStandardStreamableHTTPServerTransport {
  override async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const internals = this as unknown as Internals;
    const isReply = isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message);
    const streamId = isReply && message.id !== undefined ? internals._requestToStreamMapping.get(message.id) : undefined;
    await super.send(message, options);
    if (streamId === undefined || !internals._streamMapping.get(streamId)?.resolveJson) return;
    for (const waiting of internals._requestToStreamMapping.values()) if (waiting === streamId) return;
    internals._streamMapping.delete(streamId);
  }

  /** Replies still held by the transport (for leak tests). */
  get heldReplies(): number {
    let held = 0;
    for (const entry of (this as unknown as Internals)._streamMapping.values()) if (entry.resolveJson) held += 1;
    return held;
  }
}
