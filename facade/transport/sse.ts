const encoder = new TextEncoder();

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
}

/**
 * Serves an async iterable as server-sent events, one `data:` frame per item, each flushed
 * as it is produced. A client that disconnects cancels the iterator.
 *
 * Pull-based on purpose, where h3's `createEventStream` is push-based: an item is taken from
 * the iterator only when the client has read the previous one, so a model's stream is read
 * upstream no faster than the client reads it and nothing piles up in memory for a slow
 * client; a client that goes away ends the iterator (`return()`), where chat metering
 * settles a dropped stream for what was sent.
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
  const frame = (data: unknown) => {
    const type = options.named ? (data as { type?: unknown } | null)?.type : undefined;
    const event = typeof type === "string" ? `event: ${type}\n` : "";
    return encoder.encode(`${event}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
  };

  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await iterator.next();
        if (done) {
          if (options.done) controller.enqueue(frame(options.done));
          controller.close();
          finished = true;
          end();
          return;
        }
        controller.enqueue(frame(value));
      } catch (error) {
        if (finished) return;
        controller.enqueue(frame(options.errorFrame(error)));
        controller.close();
        finished = true;
        end(error);
      }
    },
    async cancel() {
      options.abort.abort();
      finished = true;
      await iterator.return?.().catch(() => undefined);
      end();
    },
  });

  const headers = new Headers(options.headers);
  headers.set("content-type", "text/event-stream; charset=utf-8");
  headers.set("cache-control", "no-cache");
  headers.set("connection", "keep-alive");
  if (!options.plain) headers.set("x-accel-buffering", "no");
  return new Response(stream, { status: 200, headers });
}
