import { FastResponse } from "srvx";

export interface SseOptions {
  /** Sent as a last `data:` line after the items, e.g. `[DONE]`. */
  done?: string;
  /**
   * Each item's `type` is also its frame's `event:` name (the Responses and Messages dialects'
   * typed events), the error frame's too when its body has one.
   */
  named?: boolean;
  /** Renders an error raised mid-stream as the data of one last frame. */
  errorFrame(error: unknown): unknown;
  headers: Headers;
  /** Aborted when the client goes away, so the producer (an upstream request) stops too. */
  abort: AbortController;
  /** Called once when the stream ends: finished, failed (with the error that cut it) or cancelled by the client. */
  onEnd?(error?: unknown): void;
  /**
   * Leave out `X-Accel-Buffering` (which tells a proxy not to buffer): the Platform API adds
   * no service header but `X-Service-Request-Id` (docs/interface.md 4.2).
   */
  plain?: boolean;
  /** The text of an item's frame when it already has one (rpc/wire-text.ts); JSON otherwise. */
  wireText?(item: unknown): string | undefined;
}

/** Where the frames go: the Node response itself (srvx hands it to `pipe`), or any Node writable. */
interface FrameSink {
  write(chunk: string): boolean;
  end(): unknown;
  once(event: "drain" | "close", listener: () => void): unknown;
  off(event: "drain" | "close", listener: () => void): unknown;
  readonly destroyed?: boolean;
  readonly writableFinished?: boolean;
}

/**
 * Serves an async iterable as server-sent events, one `data:` frame per item, each written as
 * it is produced. A client that disconnects cancels the iterator.
 *
 * Pull-based on purpose, where h3's `createEventStream` is push-based: an item is taken from
 * the iterator only when the socket took the previous one (the response's `write` accepted it,
 * or after its `drain`), so a model's stream is read upstream no faster than the client reads
 * it and nothing piles up in memory for a slow client; a client that goes away ends the
 * iterator (`return()`), where chat metering settles a dropped stream for what was sent.
 *
 * The frames are written straight to the Node response (docs/performance.md "Streams"):
 * srvx's response sends a body that has a `pipe` method by calling it with the Node response
 * right after the headers, so no web `ReadableStream`, `TextEncoder` or reader loop stands
 * between the iterator and the socket. Off Node (an in-process `fetch` of the app), srvx pipes
 * the same body into a Node stream that becomes the web response's body.
 */
export function toSseResponse(items: AsyncIterable<unknown>, options: SseOptions): Response {
  const iterator = items[Symbol.asyncIterator]();
  let finished = false;
  let ended = false;
  const end = (error?: unknown) => {
    if (ended) return;
    ended = true;
    options.onEnd?.(error);
  };
  const text = (data: unknown) => (typeof data === "string" ? data : (options.wireText?.(data) ?? JSON.stringify(data)));
  const frame = (data: unknown) => {
    const type = options.named ? (data as { type?: unknown } | null)?.type : undefined;
    return `${typeof type === "string" ? `event: ${type}\n` : ""}data: ${text(data)}\n\n`;
  };
  const cancel = async () => {
    if (finished) return;
    finished = true;
    options.abort.abort();
    await iterator.return?.().catch(() => undefined);
    end();
  };

  const pump = async (sink: FrameSink) => {
    const onClose = () => void cancel();
    sink.once("close", onClose);
    const waitDrain = () =>
      new Promise<void>((resolve) => {
        const done = () => {
          sink.off("drain", done);
          sink.off("close", done);
          resolve();
        };
        sink.once("drain", done);
        sink.once("close", done);
      });
    // The error that cut the stream, if one did: the request counts as that error (facade/transport/instrument.ts).
    let failure: unknown;
    try {
      for (;;) {
        let step: IteratorResult<unknown>;
        try {
          step = await iterator.next();
        } catch (error) {
          if (finished) return;
          sink.write(frame(options.errorFrame(error)));
          failure = error;
          break;
        }
        if (finished) return;
        if (step.done) {
          if (options.done) sink.write(frame(options.done));
          break;
        }
        if (!sink.write(frame(step.value))) await waitDrain();
        if (finished) return;
      }
      finished = true;
      sink.off("close", onClose);
      sink.end();
      end(failure);
    } catch {
      // The sink failed under us (the socket went away while writing): end like a cancel.
      sink.off("close", onClose);
      finished = false;
      await cancel();
    }
  };

  const body = {
    pipe<T extends FrameSink>(sink: T): T {
      if (sink.destroyed) void cancel();
      else void pump(sink);
      return sink;
    },
    /** The response was dropped before it was sent (client gone, HEAD). */
    destroy() {
      void cancel();
    },
    abort() {
      void cancel();
    },
  };

  const headers = new Headers(options.headers);
  headers.set("content-type", "text/event-stream; charset=utf-8");
  headers.set("cache-control", "no-cache");
  headers.set("connection", "keep-alive");
  if (!options.plain) headers.set("x-accel-buffering", "no");
  return new FastResponse(body as unknown as ConstructorParameters<typeof FastResponse>[0], { status: 200, headers });
}
