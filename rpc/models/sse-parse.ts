/**
 * Reads server-sent events from a byte stream and yields each event's `data` as it arrives
 * (multi-line data joined by "\n"), ending at `[DONE]` or the end of the stream. Nothing is
 * buffered beyond the event being read.
 */
export async function* readSseData(body: ReadableStream<Uint8Array>, onActivity: () => void): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
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
    reader.releaseLock();
  }
}

function dataOf(event: string): string | undefined {
  const lines: string[] = [];
  for (const line of event.split(/\r?\n/)) {
    if (line.startsWith("data:")) lines.push(line.slice(line.startsWith("data: ") ? 6 : 5));
  }
  return lines.length ? lines.join("\n") : undefined;
}
