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
 * Reads server-sent events from a byte stream (an undici response body, any Node stream) and yields each event's `data` as soon as the
 * event is complete (multi-line data joined by "\n"). Comments, keep-alives and events
 * without data are dropped; nothing is buffered beyond the event being read. A reader that
 * stops early (the caller went away) cancels the body, so the upstream stops sending.
 * The one SSE splitter for model provider streams and the orchestrator relay.
 */
export async function* readSseData(
  body: AsyncIterable<Uint8Array> & { destroy?(): unknown },
  options: SseReadOptions = {},
): AsyncGenerator<string> {
  const { onActivity, signal, endAtDone = false } = options;
  const iterator = body[Symbol.asyncIterator]();
  const decoder = new TextDecoder();
  let buffer = "";
  let ended = false;
  // One promise for the whole read, raced with each chunk: a pending read ends when the signal aborts.
  let onAbort: (() => void) | undefined;
  const aborted = signal
    ? new Promise<never>((_, reject) => {
        onAbort = () => reject(signal.reason);
        signal.addEventListener("abort", onAbort, { once: true });
      })
    : undefined;
  aborted?.catch(() => undefined);
  try {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const { done, value } = aborted ? await Promise.race([iterator.next(), aborted]) : await iterator.next();
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
          // The rest of the body (normally just its end) is read in the background, so a
          // kept-alive connection goes back to its pool.
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
    if (onAbort) signal!.removeEventListener("abort", onAbort);
    // Stopping early destroys the stream and so its connection. Directly where it can: a
    // stream's async iterator queues return() behind a read still pending.
    if (!ended) {
      if (typeof body.destroy === "function") body.destroy();
      else await iterator.return?.().catch(() => undefined);
    }
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
