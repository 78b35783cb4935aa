import type { IncomingMessage } from "node:http";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { GuardedRequestInit } from "../../rpc/outbound/guarded-fetch.js";
import { readSseData } from "../../rpc/sse-parse.js";
import { outgoingTraceparent } from "../../rpc/tracing.js";
import type { ToolResult } from "../../rpc/tools/types.js";
import { isObject } from "../../rpc/validate.js";
import { type CallInFlight, inFlight, StreamEnded } from "./call-context.js";

/** Resumptions of one call's SSE answer (a server that closes it to be polled, SEP-1699). */
const MAX_RESUMES = 5;

/** The guarded connection answered with Node's own response (rpc/outbound/guarded-fetch.ts guardedRequest). */
export type GuardedRequest = (url: URL, init: GuardedRequestInit) => Promise<IncomingMessage>;

/** One `tools/call` sent directly, in an established session of `client` over `transport`. */
export interface DirectCall {
  client: Client;
  transport: StreamableHTTPClientTransport;
  request: GuardedRequest;
  url: URL;
  /** What every request to the server carries (the record's headers, the gateway's own authorization). */
  headers: Record<string, string>;
  /** The request's JSON-RPC id: the connection's own, never one of the SDK client's numeric ones. */
  id: string;
  /** The server's own name of the tool. */
  tool: string;
  args: Record<string, unknown>;
  timeoutMs: number;
  signal: AbortSignal;
  call: CallInFlight;
}

/**
 * Passes an SSE body through unchanged, noting the last `id:` field it carried in `last`
 * (the event to resume after).
 */
async function* eventIds(body: AsyncIterable<Uint8Array | string>, last: { value: string | undefined }): AsyncGenerator<Uint8Array> {
  let partial = "";
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk;
    const lines = (partial + decoder.decode(bytes, { stream: true })).split(/\r\n|\r|\n/);
    partial = lines.pop() ?? "";
    for (const line of lines) if (line.startsWith("id:")) last.value = line.slice(3).trimStart();
    yield bytes;
  }
}

/**
 * One `tools/call` as a plain JSON-RPC POST in the SDK client's session (its id and protocol
 * version, the record's headers), the answer read as JSON or as an SSE stream. Everything on
 * the stream besides the reply — the server's requests (sampling, elicitation, roots), log
 * messages — is handed to the SDK client as if its transport had read it, in the call's
 * context, so relays and notifications work as on the SDK's own path. Cancellation and the
 * timeout tell the server `notifications/cancelled` like the SDK does; a stream that ends
 * without the reply fails the call at once. Errors are thrown as the SDK would (McpError for
 * a JSON-RPC error or the timeout), for UpstreamConnection.call to map.
 *
 * The common call (no progress asked, no output schema to check, the session established)
 * goes this way: the SDK transport's Web fetch and stream pipeline cost several times more
 * (docs/benchmarks-bridge.md "MCP proxy").
 */
export async function postToolCall({
  client,
  transport,
  request,
  url,
  headers: outgoing,
  id,
  tool,
  args,
  timeoutMs,
  signal,
  call,
}: DirectCall): Promise<ToolResult> {
  const abort = new AbortController();
  let timedOut = false;
  const cancel = (reason: string) => {
    if (abort.signal.aborted) return;
    abort.abort();
    void client.notification({ method: "notifications/cancelled", params: { requestId: id, reason } }).catch(() => undefined);
  };
  const timer = setTimeout(() => {
    timedOut = true;
    cancel(`Request timed out after ${timeoutMs} ms`);
  }, timeoutMs);
  const onAbort = () => cancel(String(signal.reason ?? "cancelled"));
  if (signal.aborted) onAbort();
  else signal.addEventListener("abort", onAbort, { once: true });
  try {
    const headers: Record<string, string> = {
      ...outgoing,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": transport.sessionId!,
    };
    if (transport.protocolVersion) headers["mcp-protocol-version"] = transport.protocolVersion;
    // The tool call's span, as MCP carries it (docs/observability.md "Traces").
    const traceparent = outgoingTraceparent();
    const params = traceparent ? { name: tool, arguments: args, _meta: { traceparent } } : { name: tool, arguments: args };
    const body = JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params });
    const reply = await new Promise<Record<string, unknown>>((resolve, reject) => {
      abort.signal.addEventListener(
        "abort",
        () => reject(timedOut ? new McpError(ErrorCode.RequestTimeout, "Request timed out") : new Error("cancelled")),
        { once: true },
      );
      request(url, { method: "POST", headers, body, signal: abort.signal }).then((response) => {
        const type = response.headers["content-type"] ?? "";
        const status = response.statusCode ?? 0;
        let text = "";
        let settled = false;
        const deliver = (message: unknown) => {
          if (!isObject(message)) return;
          if (message.id === id && ("result" in message || "error" in message)) {
            settled = true;
            resolve(message);
          } else inFlight.run(call, () => transport.onmessage?.(message as never));
        };
        if (status < 200 || status > 299 || !type.startsWith("text/event-stream")) {
          response.setEncoding("utf8");
          response.on("error", reject);
          response.on("data", (chunk: string) => (text += chunk));
          response.on("end", () => {
            if (status < 200 || status > 299) return reject(new Error(`Error POSTing to endpoint (HTTP ${status}): ${text.slice(0, 200)}`));
            try {
              const parsed: unknown = JSON.parse(text);
              for (const message of Array.isArray(parsed) ? parsed : [parsed]) deliver(message);
            } catch (error) {
              return reject(error);
            }
            if (!settled) reject(new StreamEnded());
          });
          return;
        }
        // SSE, split by the project's one splitter, read to its end (the connection goes back
        // to the pool); a stream that ends or breaks before the reply ends the call, unless it
        // carried event ids: then it is resumed with a GET and `Last-Event-ID` (MCP Streamable
        // HTTP "Resumability and Redelivery"), as the SDK's transport does, a few times at most.
        void (async () => {
          let stream: IncomingMessage = response;
          for (let resumed = 0; ; resumed += 1) {
            const lastId = { value: undefined as string | undefined };
            try {
              for await (const data of readSseData(eventIds(stream, lastId))) {
                let message: unknown;
                try {
                  message = JSON.parse(data);
                } catch {
                  continue; // Not JSON: ignored, as the SDK transport reports and skips it.
                }
                deliver(message);
              }
            } catch (error) {
              // An error of the connection (as Node's response emits it) fails the call as a
              // transport failure; a stream closed early without one is a stream ended (below).
              if ((error as NodeJS.ErrnoException).code !== "ERR_STREAM_PREMATURE_CLOSE") return reject(error);
            }
            if (settled || abort.signal.aborted) return;
            if (lastId.value === undefined || resumed >= MAX_RESUMES) return reject(new StreamEnded());
            try {
              stream = await request(url, {
                method: "GET",
                headers: { ...headers, accept: "text/event-stream", "last-event-id": lastId.value },
                signal: abort.signal,
              });
            } catch (error) {
              return reject(error);
            }
            if ((stream.statusCode ?? 0) !== 200) {
              stream.resume();
              return reject(new StreamEnded());
            }
          }
        })();
      }, reject);
    });
    if (isObject(reply.error)) {
      const { code, message, data } = reply.error as { code?: unknown; message?: unknown; data?: unknown };
      throw new McpError(typeof code === "number" ? code : ErrorCode.InternalError, String(message ?? "error"), data);
    }
    if (!isObject(reply.result)) throw new McpError(ErrorCode.InvalidRequest, "Invalid tools/call result");
    const result = reply.result;
    if (result.content !== undefined && !Array.isArray(result.content))
      throw new McpError(ErrorCode.InvalidRequest, "Invalid tools/call result: content must be an array");
    return (result.content === undefined ? { ...result, content: [] } : result) as unknown as ToolResult;
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", onAbort);
  }
}
