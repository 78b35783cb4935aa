import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { readSseData } from "../../rpc/sse-parse.js";

/** A Node byte stream of `chunks` (as an undici response body is), noting whether it was destroyed. */
function body(chunks: string[]): { stream: Readable; cancelled: () => boolean } {
  let cancelled = false;
  let index = 0;
  const stream = new Readable({
    read() {
      this.push(index < chunks.length ? Buffer.from(chunks[index++]!) : null);
    },
    destroy(error, callback) {
      cancelled = true;
      callback(error);
    },
  });
  return { stream, cancelled: () => cancelled };
}

async function collect(iterable: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

describe("readSseData (the one SSE splitter)", () => {
  it("splits events across chunk boundaries, joins multi-line data, drops comments and data-less events", async () => {
    const { stream } = body([": keep-alive\n\n", 'data: {"a"', ":1}\n\nevent: x\n\ndata: line1\ndata: line2\r\n\r\n", "data:tail"]);
    expect(await collect(readSseData(stream))).toEqual(['{"a":1}', "line1\nline2", "tail"]);
  });

  it("relays [DONE] as data by default and ends at it for OpenAI streams", async () => {
    expect(await collect(readSseData(body(["data: 1\n\ndata: [DONE]\n\n"]).stream))).toEqual(["1", "[DONE]"]);
    const openai = body(["data: 1\n\ndata: [DONE]\n\ndata: after\n\n"]);
    expect(await collect(readSseData(openai.stream, { endAtDone: true }))).toEqual(["1"]);
    expect(openai.cancelled()).toBe(false);
  });

  it("cancels the body when the reader stops early, and throws the signal's reason when it aborts", async () => {
    const early = body(["data: 1\n\n", "data: 2\n\n", "data: 3\n\n"]);
    for await (const data of readSseData(early.stream)) if (data === "1") break;
    expect(early.cancelled()).toBe(true);

    const controller = new AbortController();
    const pending = new Readable({ read() {} });
    const reading = collect(readSseData(pending, { signal: controller.signal })).catch((error) => error);
    controller.abort(new Error("timed out"));
    expect(((await reading) as Error).message).toBe("timed out");
    expect(pending.destroyed).toBe(true);
  });
});
