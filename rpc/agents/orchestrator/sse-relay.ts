import { dataOf } from "../../sse-parse.js";

/**
 * Reads the orchestrator's server-sent events and yields each event's `data` as soon as the
 * event is complete, unchanged (including a `[DONE]` marker), so our SSE response relays
 * the stream event by event. Comments and keep-alives (`:` lines) and events without data
 * are dropped; multi-line data is joined with "\n" (it is JSON in practice).
 * Returning early (the caller went away) cancels the upstream body.
 */
export async function* relaySseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let boundary: RegExpExecArray | null;
      while ((boundary = /\r?\n\r?\n/.exec(buffer))) {
        const event = buffer.slice(0, boundary.index);
        buffer = buffer.slice(boundary.index + boundary[0].length);
        const data = dataOf(event);
        if (data !== undefined) yield data;
      }
    }
    const tail = dataOf(buffer + decoder.decode());
    if (tail !== undefined) yield tail;
    finished = true;
  } finally {
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
