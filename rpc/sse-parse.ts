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

/** What `readSseEvents` adds to `readSseData`: items made from the data as the bytes arrive. */
export interface SseEventOptions<T> extends SseReadOptions, Omit<FrameEventOptions<string, T>, "last"> {}

/**
 * How a byte stream is cut into frames (SSE events, AWS event-stream messages). It keeps what
 * it needs between reads; a throw ends the stream with that error.
 */
export interface Framing<F> {
  /** One read's bytes: each frame they complete handed to `take`, in order, until `take` gives false. */
  bytes(chunk: Uint8Array, take: (frame: F) => boolean): void;
  /** The body ended: a last frame the bytes left unterminated, if the format has one. */
  end(take: (frame: F) => boolean): void;
}

/** `readFrames`: items made from each frame as the bytes arrive (`onActivity` and `signal` as in `SseReadOptions`). */
export interface FrameEventOptions<F, T> extends Omit<SseReadOptions, "endAtDone"> {
  /** A frame that ends the stream where it stands (the rest of the body is read and dropped). */
  last?(frame: F): boolean;
  /**
   * Makes the items a frame stands for (none, one or several), handing each to `push`.
   * Runs as the bytes arrive, before the consumer asks; a throw ends the stream with that error
   * (after the items pushed before it).
   */
  event(frame: F, push: (item: T) => void): void;
  /**
   * Runs when the stream ends on its own (the body's end, or its `last` frame: `[DONE]` with `endAtDone`); it may
   * push last items, and a throw ends the stream with that error.
   */
  end?(push: (item: T) => void): void;
  /** What the consumer sees of any error that ends the stream (the body's, the signal's, `event`'s or `end`'s). */
  mapError?(error: unknown): unknown;
}

type Body = AsyncIterable<Uint8Array> & { destroy?(error?: unknown): unknown };

/**
 * Reads server-sent events from a byte stream (an undici response body, any Node stream) and yields each event's `data` as soon as the
 * event is complete (multi-line data joined by "\n"). Comments, keep-alives and events
 * without data are dropped; nothing is buffered beyond the event being read. A reader that
 * stops early (the caller went away) cancels the body, so the upstream stops sending.
 * The one SSE splitter for model provider streams and the orchestrator relay.
 */
export function readSseData(body: Body, options: SseReadOptions = {}): AsyncIterableIterator<string> {
  return readSseEvents(body, { ...options, event: (data, push) => push(data) });
}

/** Items queued ahead of the consumer before a Node body is paused (one read holds a few events). */
const HIGH_WATER = 16;

/** `readSseData` with each event's data turned into items by `event` as the bytes arrive (`readFrames`). */
export function readSseEvents<T>(body: Body, options: SseEventOptions<T>): AsyncIterableIterator<T> {
  const { endAtDone = false, ...rest } = options;
  return readFrames(body, sseFraming(), endAtDone ? { ...rest, last: (data) => data === "[DONE]" } : rest);
}

/** Server-sent events: the data of each event (multi-line data joined by "\n"), events without data dropped. */
function sseFraming(): Framing<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  return {
    bytes(chunk, take) {
      buffer += decoder.decode(chunk, { stream: true });
      let start = 0;
      for (;;) {
        const at = blankLine(buffer, start);
        if (at < 0) break;
        const data = dataOf(buffer.slice(start, at));
        start = at + blankLength;
        if (data !== undefined && !take(data)) {
          buffer = "";
          return;
        }
      }
      if (start > 0) buffer = buffer.slice(start);
    },
    end(take) {
      const data = dataOf(buffer + decoder.decode());
      buffer = "";
      if (data !== undefined) take(data);
    },
  };
}

/**
 * A byte stream cut into frames by `framing`, each turned into items by `event` as the bytes
 * arrive (docs/performance.md "Streams"). A Node stream is read by its `data` events and split,
 * and its items made, in the same turn, with no generator or promise per frame: the consumer's
 * `next()` takes a queued item at once or waits for the next read. More than a few items
 * ahead of the consumer pause the body, so a slow reader slows the upstream and nothing piles
 * up. Any other async iterable of bytes is read one chunk per wait. Reading starts at the
 * first `next()`.
 */
export function readFrames<F, T>(body: Body, framing: Framing<F>, options: FrameEventOptions<F, T>): AsyncIterableIterator<T> {
  const { onActivity, signal, last, event, end, mapError } = options;
  const node = isNodeReadable(body) ? body : undefined;
  const queue: T[] = [];
  let head = 0;
  const push = (item: T) => {
    queue.push(item);
  };
  // open: reading; ended: the source is done (its items may still be queued); failed: an error
  // waits behind the queued items; closed: the consumer has everything, or stopped.
  let state: "idle" | "open" | "ended" | "failed" | "closed" = "idle";
  let failure: unknown;
  let waiting: { resolve(step: IteratorResult<T>): void; reject(error: unknown): void } | undefined;
  let paused = false;
  let iterator: AsyncIterator<Uint8Array> | undefined;
  let pulling = false;

  const onAbort = () => {
    // A destroyable body is destroyed with the reason, which ends its read with that error.
    if (typeof body.destroy === "function") body.destroy(signal!.reason);
    fail(signal!.reason);
  };
  const detach = () => {
    signal?.removeEventListener("abort", onAbort);
    if (node) {
      node.off("data", onBytes);
      node.off("end", onBodyEnd);
      node.off("error", onError);
      // An error the body emits after this (a destroy, a late reset) has nobody to tell.
      node.on("error", ignore);
    }
  };

  /** The body's bytes: every complete frame made into its items, in this turn. */
  function onBytes(chunk: Uint8Array): void {
    if (state !== "open") return;
    onActivity?.();
    try {
      framing.bytes(chunk, take);
    } catch (error) {
      fail(error);
    }
    if (state !== "open") return;
    if (node && !paused && queue.length - head >= HIGH_WATER) {
      paused = true;
      node.pause();
    }
    deliver();
  }

  /** One frame's items into the queue; false once the stream is over (its last frame, an error). */
  function take(frame: F): boolean {
    if (last?.(frame)) {
      // The rest of the body (normally just its end) is read and dropped, so a kept-alive
      // connection goes back to its pool.
      finish();
      if (state !== "ended") return false;
      if (node) {
        node.on("data", ignore);
        if (paused) node.resume();
      } else if (iterator) void drainIterator(iterator);
      return false;
    }
    try {
      event(frame, push);
    } catch (error) {
      fail(error);
      return false;
    }
    return true;
  }

  function onBodyEnd(): void {
    if (state !== "open") return;
    // A body that ended on its own just as the signal aborted: the abort wins.
    if (signal?.aborted) {
      fail(signal.reason);
      return;
    }
    try {
      framing.end(take);
    } catch (error) {
      fail(error);
    }
    if (state === "open") finish();
  }

  /** The source ended on its own: `end` may still push last items, or turn that into an error. */
  function finish(): void {
    try {
      end?.(push);
    } catch (error) {
      fail(error);
      return;
    }
    state = "ended";
    detach();
    deliver();
  }

  function onError(error: unknown): void {
    fail(signal?.aborted ? signal.reason : error);
  }

  function fail(error: unknown): void {
    if (state !== "open" && state !== "idle") return;
    state = "failed";
    failure = mapError ? mapError(error) : error;
    detach();
    if (typeof body.destroy === "function" && !(body as { destroyed?: boolean }).destroyed) body.destroy();
    else if (iterator) void iterator.return?.().catch(() => undefined);
    deliver();
  }

  /** Hands the consumer waiting the next item, or the end, or the error. */
  function deliver(): void {
    if (!waiting) return;
    const { resolve, reject } = waiting;
    if (head < queue.length) {
      waiting = undefined;
      resolve({ value: shift(), done: false });
    } else if (state === "ended" || state === "closed") {
      waiting = undefined;
      state = "closed";
      resolve({ value: undefined, done: true });
    } else if (state === "failed") {
      waiting = undefined;
      state = "closed";
      reject(failure);
    } else if (!node && !pulling) void pull();
  }

  function shift(): T {
    const item = queue[head]!;
    queue[head++] = undefined as T;
    if (head === queue.length) queue.length = head = 0;
    if (paused && queue.length - head < HIGH_WATER / 2 && state === "open") {
      paused = false;
      node!.resume();
    }
    return item;
  }

  /** Any other async iterable: one chunk per wait, while the consumer waits. */
  async function pull(): Promise<void> {
    pulling = true;
    try {
      while (state === "open" && waiting && head === queue.length) {
        let step: IteratorResult<Uint8Array>;
        try {
          step = await iterator!.next();
        } catch (error) {
          onError(error);
          break;
        }
        if (step.done) onBodyEnd();
        else onBytes(step.value);
      }
    } finally {
      pulling = false;
    }
  }

  function start(): void {
    state = "open";
    if (signal?.aborted) {
      fail(signal.reason);
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    if (node) {
      node.on("data", onBytes);
      node.on("end", onBodyEnd);
      node.on("error", onError);
    } else {
      iterator = body[Symbol.asyncIterator]();
    }
  }

  const items: AsyncIterableIterator<T> = {
    next() {
      if (state === "idle") start();
      if (head < queue.length) return Promise.resolve({ value: shift(), done: false });
      if (state === "closed") return Promise.resolve({ value: undefined, done: true });
      if (waiting) return Promise.reject(new Error("readSseEvents: next() called while a read is pending"));
      return new Promise<IteratorResult<T>>((resolve, reject) => {
        waiting = { resolve, reject };
        deliver();
      });
    },
    return(value?: unknown) {
      // Stopping early destroys the body and so its connection.
      if (state === "idle" || state === "open") {
        state = "closed";
        detach();
        if (typeof body.destroy === "function") body.destroy();
        else if (iterator) void iterator.return?.().catch(() => undefined);
      }
      state = "closed";
      queue.length = head = 0;
      if (waiting) {
        waiting.resolve({ value: undefined, done: true });
        waiting = undefined;
      }
      return Promise.resolve({ value: value as T, done: true });
    },
    [Symbol.asyncIterator]() {
      return items;
    },
  };
  return items;
}

function ignore(): void {}

interface NodeReadable extends Body {
  on(event: string, listener: (...args: never[]) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
  pause(): unknown;
  resume(): unknown;
}

function isNodeReadable(body: Body): body is NodeReadable {
  const candidate = body as Partial<NodeReadable>;
  return typeof candidate.on === "function" && typeof candidate.pause === "function" && typeof candidate.resume === "function";
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
