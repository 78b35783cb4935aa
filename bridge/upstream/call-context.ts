import { AsyncLocalStorage } from "node:async_hooks";
import { setMaxListeners } from "node:events";
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { GuardedFetch } from "../../rpc/outbound/guarded-fetch.js";
import type { ClientRelay } from "../../rpc/tools/types.js";

/**
 * The `tools/call` in flight on an upstream connection, and its answer stream: which call a
 * server-to-client request belongs to, and a call that fails at once when its answer stream
 * ends without the reply (bridge/upstream/connection.ts, direct-call.ts, own-sessions.ts).
 */

/** A call's answer (JSON or SSE) ended without its reply. */
export class StreamEnded extends Error {
  override name = "StreamEnded";
}

/**
 * The `tools/call` being sent, in the async context of the SDK client's work for it. One
 * connection serves every client session, and the SDK does not say which request a
 * server-to-client request relates to; but the client reads a call's SSE answer in the async
 * context the call was sent from, so a request arriving on that stream finds its call here.
 * Requests on the server's GET stream (unrelated to any call) find none.
 */
export interface CallInFlight {
  relay: ClientRelay | undefined;
  /** The call settled: its relay is closed. */
  done: boolean;
  /** The first POST of the context (the tools/call itself) was sent. */
  posted: boolean;
  /** The call's SSE answer ended (or broke) without a reply and without a resumption id. */
  streamEnded(): void;
}
export const inFlight = new AsyncLocalStorage<CallInFlight>();

/** Server-to-client requests the gateway relays (docs/mcp.md "Requests of upstream servers"). */
export const RELAYED = [
  [CreateMessageRequestSchema, "sampling/createMessage"],
  [ElicitRequestSchema, "elicitation/create"],
  [ListRootsRequestSchema, "roots/list"],
] as const;

/** How long after a call's answer stream ended without its reply the call fails. */
const STREAM_END_GRACE_MS = 100;

/**
 * A call's POST answered with an SSE stream is watched: when the stream ends or breaks before
 * the reply, the call fails at once instead of at its timeout (a server that crashed, or closed
 * the stream). A stream carrying SSE ids may be resumed by the SDK, so it is left alone.
 */
export function watchedFetch(base: GuardedFetch | typeof fetch): GuardedFetch {
  return (async (url: Parameters<typeof fetch>[0], init?: RequestInit) => {
    // The SDK transport passes its one AbortSignal with every request: more than 10 calls in
    // flight would otherwise warn of a listener leak that is none (each request removes its own).
    if (init?.signal) setMaxListeners(0, init.signal);
    const call = inFlight.getStore();
    const watch = call !== undefined && !call.posted && init?.method === "POST";
    if (watch) call.posted = true;
    const response = await (base as typeof fetch)(url, init);
    if (!watch || !response.body || !(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) return response;
    let resumable = false;
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    // The SDK parses what was read a moment later: the end is reported after a short grace, so a
    // reply in the last chunk settles the call first.
    const ended = () => {
      if (!resumable) setTimeout(() => call.streamEnded(), STREAM_END_GRACE_MS).unref();
    };
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            ended();
            controller.close();
            return;
          }
          if (!resumable && /(^|\n)id:/.test(decoder.decode(value, { stream: true }))) resumable = true;
          controller.enqueue(value);
        } catch (error) {
          ended();
          controller.error(error);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  }) as GuardedFetch;
}
