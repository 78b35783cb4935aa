/**
 * Layers over one stream of items that fuse into a single step per item (docs/performance.md
 * "Streams"). A streamed chat answer passes several layers between the provider and the SSE
 * writer: the provider call's timing (passive health), tracing, the routing relay, the chat
 * relay that meters each chunk, the stream-quota release. Written as iterators wrapping
 * iterators, each layer costs every item one more promise and `then`. Written with `layered`,
 * a layer stacked on another layer's iterator joins it: the items are read from the stream at
 * the bottom once, and every layer's step runs on them in the same reaction, bottom first.
 * Stopping (`return()`) still goes through each layer, top first.
 */

/** A layer's answer that drops the item: the next one is read from the bottom in its place. */
export const SKIP: unique symbol = Symbol("skip");

type Out<U> = IteratorResult<U> | typeof SKIP;
/** What a layer's step gives: the step it passes up, SKIP, or a promise of either (the items after it wait). */
export type LayerOut<U> = Out<U> | Promise<Out<U>>;

export interface Layer<T, U> {
  /** Each step from below, an item or the end: what this layer passes up. A throw passes an error up. */
  step(step: IteratorResult<T>): LayerOut<U>;
  /**
   * An error from below: what goes up. Default: the error, as it is. (A throw of this layer's
   * own step goes to the error steps of the layers above, as with `then`.)
   */
  error?(error: unknown): LayerOut<U>;
  /**
   * The consumer stops: this layer's own part, which runs `below()` (stopping the layers
   * beneath) when and if it wants to. Default: `below()` only.
   */
  stop?(below: () => Promise<void>): Promise<void>;
}

type Apply<U> = (step: IteratorResult<unknown>) => LayerOut<U>;
type Fail<U> = (error: unknown) => LayerOut<U>;

const rethrow = (error: unknown): never => {
  throw error;
};
const isPromise = <V>(value: unknown): value is Promise<V> => typeof (value as Promise<V> | null)?.then === "function";

/**
 * `layer`'s step on what the layers beneath gave. An error from beneath goes to its error step;
 * a throw of its own step goes up, to the error steps of the layers above (as with `then`).
 */
function onTop<T, U>(below: LayerOut<T>, layer: Layer<T, U>, fail: Fail<U>): LayerOut<U> {
  if (below === SKIP) return SKIP;
  if (isPromise<Out<T>>(below)) return below.then((out) => (out === SKIP ? SKIP : layer.step(out)), fail);
  return caught(() => layer.step(below));
}

class Layered<U> implements AsyncIterableIterator<U> {
  readonly #stop: () => Promise<void>;
  #taken: (() => LayerOut<U>) | undefined;
  readonly #onStep = (step: IteratorResult<unknown>) => this.#unskip(this.apply(step));
  readonly #onError = (error: unknown) => this.#unskip(this.fail(error));

  constructor(
    readonly bottom: AsyncIterator<unknown>,
    readonly apply: Apply<U>,
    readonly fail: Fail<U>,
    stop: () => Promise<void>,
    taken: (() => LayerOut<U>) | undefined,
  ) {
    this.#stop = stop;
    this.#taken = taken;
  }

  /** The step an item already taken from below by a layer gives, waiting for the first `next()`. */
  takeTaken(): (() => LayerOut<U>) | undefined {
    const taken = this.#taken;
    this.#taken = undefined;
    return taken;
  }

  next(): Promise<IteratorResult<U>> {
    const taken = this.takeTaken();
    if (taken) {
      try {
        return Promise.resolve(this.#unskip(taken()));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    let read: Promise<IteratorResult<unknown>>;
    try {
      read = this.bottom.next();
    } catch (error) {
      read = Promise.reject(error);
    }
    return read.then(this.#onStep, this.#onError);
  }

  #unskip(out: LayerOut<U>): IteratorResult<U> | Promise<IteratorResult<U>> {
    if (out === SKIP) return this.next();
    if (isPromise<Out<U>>(out)) return out.then((settled) => (settled === SKIP ? this.next() : settled));
    return out;
  }

  async return(value?: unknown): Promise<IteratorResult<U>> {
    this.#taken = undefined;
    await this.#stop();
    return { done: true, value: value as U };
  }

  async throw(error?: unknown): Promise<IteratorResult<U>> {
    await this.return();
    throw error;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<U> {
    return this;
  }
}

/**
 * `source` seen through `layer`. When `source` is itself a `layered` iterator, the two fuse:
 * the result reads the bottom stream directly, and `source` must not be read any more (its
 * `return()` is still how the layers beneath stop). `taken` is a step a caller already took
 * from `source` (the routing relay waits for the first chunk before it answers): it goes
 * through this layer (and the ones stacked later) at the first `next()`.
 */
export function layered<T, U>(source: AsyncIterator<T>, layer: Layer<T, U>, taken?: IteratorResult<T>): AsyncIterableIterator<U> {
  const fail: Fail<U> = layer.error ? (error) => layer.error!(error) : rethrow;
  const stopBelow = async () => {
    try {
      await source.return?.();
    } catch {
      // already closed below
    }
  };
  const stop = layer.stop ? () => layer.stop!(stopBelow) : stopBelow;
  const ownStep = (step: IteratorResult<unknown>) => caught(() => layer.step(step as IteratorResult<T>));
  if (!(source instanceof Layered)) return new Layered<U>(source, ownStep, fail, stop, taken && (() => ownStep(taken)));
  const below = source as Layered<T>;
  const pending = below.takeTaken();
  let first: (() => LayerOut<U>) | undefined;
  if (taken) first = () => ownStep(taken);
  else if (pending) first = () => onTop(pending(), layer, fail);
  return new Layered<U>(
    below.bottom,
    (step) =>
      onTop(
        caught(() => below.apply(step)),
        layer,
        fail,
      ),
    (error) =>
      onTop(
        caught(() => below.fail(error)),
        layer,
        fail,
      ),
    stop,
    first,
  );
}

/** What the layers beneath give; a throw of theirs, as a rejection for the layers above. */
function caught<T>(run: () => LayerOut<T>): LayerOut<T> {
  try {
    return run();
  } catch (error) {
    return Promise.reject(error);
  }
}
