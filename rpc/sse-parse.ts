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
  body: AsyncIterable<Uint8Array> & { destroy?(error?: unknown): unknown },
  options: SseReadOptions = {},
): AsyncGenerator<string> {
  const { onActivity, signal, endAtDone = false } = options;
  const iterator = body[Symbol.asyncIterator]();
  const decoder = new TextDecoder();
  let buffer = "";
  let ended = false;
  // A pending read must end when the signal aborts. A body that can be destroyed is destroyed
  // with the signal's reason, which rejects the read; any other body's reads are raced with
  // one promise for the whole read (docs/performance.md "Streams": nothing per chunk).
  let onAbort: (() => void) | undefined;
  let aborted: Promise<never> | undefined;
  if (signal && typeof body.destroy === "function") {
    onAbort = () => body.destroy!(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
  } else if (signal) {
    aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
    });
    aborted.catch(() => undefined);
  }
  try {
    if (signal?.aborted) throw signal.reason;
    for (;;) {
      let step: IteratorResult<Uint8Array>;
      try {
        step = aborted ? await Promise.race([iterator.next(), aborted]) : await iterator.next();
      } catch (error) {
        throw signal?.aborted ? signal.reason : error;
      }
      // A body that ended on its own just as the signal aborted: the abort wins.
      if (step.done && signal?.aborted) throw signal.reason;
      onActivity?.();
      if (step.done) break;
      buffer += decoder.decode(step.value, { stream: true });
      // Every complete event of this read, then one slice for the rest.
      let start = 0;
      for (;;) {
        const at = blankLine(buffer, start);
        if (at < 0) break;
        const event = buffer.slice(start, at);
        start = at + blankLength;
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
      if (start > 0) buffer = buffer.slice(start);
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

const BLANK_LINE = /\r?\n\r?\n/g;
/** Length of the blank line blankLine() found last. */
let blankLength = 2;

/** Where the first blank line (the end of an event) at or after `from` starts, or -1. */
function blankLine(buffer: string, from: number): number {
  if (buffer.indexOf("\r", from) < 0) {
    blankLength = 2;
    return buffer.indexOf("\n\n", from);
  }
  BLANK_LINE.lastIndex = from;
  const match = BLANK_LINE.exec(buffer);
  if (!match) return -1;
  blankLength = match[0].length;
  return match.index;
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
  // The usual event: one `data: ` line.
  if (event.startsWith("data: ") && event.indexOf("\n") < 0 && event.indexOf("\r") < 0) return event.slice(6);
  const lines: string[] = [];
  for (const line of event.split(/\r?\n/)) {
    if (line.startsWith("data:")) lines.push(line.slice(line.startsWith("data: ") ? 6 : 5));
  }
  return lines.length ? lines.join("\n") : undefined;
}
