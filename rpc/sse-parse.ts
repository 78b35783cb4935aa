export interface SseReadOptions {
  /** Called on every read from the body (an idle timer's touch). */
  onActivity?(): void;
  /**
   * When it aborts (a timeout, the client gone), a pending read is cancelled and the signal's
   * reason is thrown: a body does not always error on its own when its request is aborted
   * after the headers arrived.
   */
  signal?: AbortSignal;
  /** End at a `[DONE]` event without yielding it (OpenAI streams); otherwise `[DONE]` is data like any other. */
  endAtDone?: boolean;
}

/**
 * Reads server-sent events from a byte stream and yields each event's `data` as soon as the
 * event is complete (multi-line data joined by "\n"). Comments, keep-alives and events
 * without data are dropped; nothing is buffered beyond the event being read. A reader that
 * stops early (the caller went away) cancels the body, so the upstream stops sending.
 * The one SSE splitter for model provider streams and the orchestrator relay.
 */
export async function* readSseData(body: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>, options: SseReadOptions = {}): AsyncGenerator<string> {
  if (!(body instanceof ReadableStream)) return yield* readNodeSse(body, options);
  const { onActivity, signal, endAtDone = false } = options;
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let finished = false;
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => undefined);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const { done, value } = await reader.read();
      if (signal?.aborted) throw signal.reason;
      onActivity?.();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let boundary: RegExpExecArray | null;
      while ((boundary = /\r?\n\r?\n/.exec(buffer))) {
        const event = buffer.slice(0, boundary.index);
        buffer = buffer.slice(boundary.index + boundary[0].length);
        const data = dataOf(event);
        if (data === undefined) continue;
        if (endAtDone && data === "[DONE]") {
          finished = true;
          return;
        }
        yield data;
      }
    }
    const tail = dataOf(buffer + decoder.decode());
    if (tail !== undefined && !(endAtDone && tail === "[DONE]")) yield tail;
    finished = true;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/**
 * The same over a Node stream (an undici response body): no web-stream reader. Stopping
 * early returns the stream's iterator, which destroys the stream and so its connection. At
 * `[DONE]` the rest of the body (normally just its end) is read in the background instead, so
 * the kept-alive connection goes back to its pool.
 */
async function* readNodeSse(body: AsyncIterable<Uint8Array>, options: SseReadOptions): AsyncGenerator<string> {
  const { onActivity, signal, endAtDone = false } = options;
  const iterator = body[Symbol.asyncIterator]();
  const decoder = new TextDecoder();
  let buffer = "";
  let ended = false;
  try {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const { done, value } = await iterator.next();
      if (signal?.aborted) throw signal.reason;
      onActivity?.();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let boundary: RegExpExecArray | null;
      while ((boundary = /\r?\n\r?\n/.exec(buffer))) {
        const event = buffer.slice(0, boundary.index);
        buffer = buffer.slice(boundary.index + boundary[0].length);
        const data = dataOf(event);
        if (data === undefined) continue;
        if (endAtDone && data === "[DONE]") {
          ended = true;
          void drainIterator(iterator);
          return;
        }
        yield data;
      }
    }
    ended = true;
    const tail = dataOf(buffer + decoder.decode());
    if (tail !== undefined && !(endAtDone && tail === "[DONE]")) yield tail;
  } finally {
    if (!ended) await iterator.return?.().catch(() => undefined);
  }
}

async function drainIterator(iterator: AsyncIterator<unknown>): Promise<void> {
  try {
    while (!(await iterator.next()).done);
  } catch {
    // the connection closed after [DONE]: nothing was lost
  }
}

/** The data of one SSE event (its `data:` lines joined), or undefined for an event without data. */
export function dataOf(event: string): string | undefined {
  const lines: string[] = [];
  for (const line of event.split(/\r?\n/)) {
    if (line.startsWith("data:")) lines.push(line.slice(line.startsWith("data: ") ? 6 : 5));
  }
  return lines.length ? lines.join("\n") : undefined;
}
