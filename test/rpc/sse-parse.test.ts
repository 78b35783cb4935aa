import { once } from "node:events";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { readSseData, readSseEvents } from "../../rpc/sse-parse.js";
import { eventually } from "../helpers/eventually.js";

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
    // Read to its end (so its connection is kept), not cut.
    if (!openai.stream.closed) await once(openai.stream, "close");
    expect(openai.stream.readableEnded).toBe(true);
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

  it("reads any async iterable of bytes too, and a signal ends a read that never returns", async () => {
    async function* bytes() {
      yield new TextEncoder().encode("data: a\n\ndata: b");
      yield new TextEncoder().encode("\n\ndata: c\n\n");
    }
    expect(await collect(readSseData(bytes()))).toEqual(["a", "b", "c"]);

    const controller = new AbortController();
    const never: AsyncIterable<Uint8Array> = { [Symbol.asyncIterator]: () => ({ next: () => new Promise(() => undefined) }) };
    const reading = collect(readSseData(never, { signal: controller.signal })).catch((error) => error);
    controller.abort(new Error("gone"));
    expect(((await reading) as Error).message).toBe("gone");
  });
});

describe("readSseEvents (items made as the bytes arrive)", () => {
  it("makes none, one or several items of an event, then runs end, which may push last items or end with an error", async () => {
    const whole = readSseEvents<string>(body(["data: a\n\ndata: skip\n\ndata: b c\n\n"]).stream, {
      event: (data, push) => {
        for (const word of data.split(" ")) if (word !== "skip") push(word);
      },
      end: (push) => push("last"),
    });
    expect(await collect(whole)).toEqual(["a", "b", "c", "last"]);

    const ended: string[] = [];
    const items = readSseEvents<number>(body(["data: 1\n\ndata: skip\n\ndata: 2\n\n"]).stream, {
      event: (data, push) => {
        if (data !== "skip") push(Number(data));
      },
      end: () => {
        ended.push("end");
        throw new Error("cut");
      },
      mapError: (error) => new Error(`upstream: ${(error as Error).message}`),
    });
    const seen: number[] = [];
    const error = await (async () => {
      for await (const item of items) seen.push(item);
    })().catch((caught: Error) => caught.message);
    expect(seen).toEqual([1, 2]);
    expect(ended).toEqual(["end"]);
    expect(error).toBe("upstream: cut");
  });

  it("a throw in map ends the stream with it and cancels the body", async () => {
    const source = body(["data: ok\n\ndata: bad\n\n", "data: later\n\n"]);
    const items = readSseEvents<string>(source.stream, {
      event: (data, push) => {
        if (data === "bad") throw new Error("invalid frame");
        push(data);
      },
    });
    expect(await items.next()).toEqual({ value: "ok", done: false });
    await expect(items.next()).rejects.toThrow("invalid frame");
    expect(source.cancelled()).toBe(true);
    expect(await items.next()).toEqual({ value: undefined, done: true });
  });

  it("pauses a Node body while the consumer is behind, and resumes it as items are taken", async () => {
    let reads = 0;
    const total = 200;
    // A small buffer of its own, as a socket's is small against a long answer.
    const stream = new Readable({
      highWaterMark: 32,
      read() {
        reads += 1;
        this.push(reads <= total ? Buffer.from(`data: ${reads}\n\n`) : null);
      },
    });
    const items = readSseEvents<number>(stream, { event: (data, push) => push(Number(data)) });
    expect(await items.next()).toEqual({ value: 1, done: false });
    // Nobody reads: the body is paused once the queue is full...
    await eventually(() => stream.isPaused());
    // ...and stops a little past the queue's limit, once its own buffer is full, instead of reading all 200.
    await eventually(() => stream.readableLength >= stream.readableHighWaterMark);
    expect(reads).toBeLessThan(60);
    const rest: number[] = [];
    for await (const item of items) rest.push(item);
    expect(rest).toEqual(Array.from({ length: total - 1 }, (_, index) => index + 2));
  });
});
