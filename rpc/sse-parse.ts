/**
 * Reads server-sent events from a byte stream and yields each event's `data` as it arrives
 * (multi-line data joined by "\n"), ending at `[DONE]` or the end of the stream. Nothing is
 * buffered beyond the event being read. When `signal` aborts (a timeout, the client gone), a
 * pending read is cancelled and the signal's reason is thrown: a body does not always error
 * on its own when its request is aborted after the headers arrived.
 */
export async function* readSseData(body: ReadableStream<Uint8Array>, onActivity: () => void, signal?: AbortSignal): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => undefined);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const { done, value } = await reader.read();
      if (signal?.aborted) throw signal.reason;
      onActivity();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let boundary: RegExpExecArray | null;
      while ((boundary = /\r?\n\r?\n/.exec(buffer))) {
        const event = buffer.slice(0, boundary.index);
        buffer = buffer.slice(boundary.index + boundary[0].length);
        const data = dataOf(event);
        if (data === undefined) continue;
        if (data === "[DONE]") return;
        yield data;
      }
    }
    const tail = dataOf(buffer + decoder.decode());
    if (tail !== undefined && tail !== "[DONE]") yield tail;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    reader.releaseLock();
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
