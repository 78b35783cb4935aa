import { describe, expect, it } from "vitest";
import { layered, SKIP, type Layer } from "../../rpc/layers.js";

/** A bottom stream of `items` (then `error`, if given) that counts its reads and notes its stop. */
function source<T>(items: T[], error?: Error) {
  let index = 0;
  const seen = { reads: 0, stopped: 0 };
  const iterator: AsyncIterator<T> = {
    next() {
      seen.reads++;
      if (index < items.length) return Promise.resolve({ done: false, value: items[index++]! });
      if (error) return Promise.reject(error);
      return Promise.resolve({ done: true, value: undefined });
    },
    return() {
      seen.stopped++;
      return Promise.resolve({ done: true, value: undefined });
    },
  };
  return { iterator, seen };
}

async function collect<T>(iterator: AsyncIterator<T>): Promise<T[]> {
  const out: T[] = [];
  for (;;) {
    const step = await iterator.next();
    if (step.done) return out;
    out.push(step.value);
  }
}

/** A layer that writes what it sees into `log` under `name`, passing everything on. */
function noting<T>(name: string, log: string[]): Layer<T, T> {
  return {
    step(step) {
      log.push(`${name}:${step.done ? "done" : String(step.value)}`);
      return step;
    },
    error(error) {
      log.push(`${name}:error ${(error as Error).message}`);
      throw error;
    },
    async stop(below) {
      log.push(`${name}:stop`);
      await below();
    },
  };
}

describe("layered (layers over one stream that fuse)", () => {
  it("runs every layer's step on each item, bottom first, reading the bottom stream once per item", async () => {
    const { iterator, seen } = source([1, 2]);
    const log: string[] = [];
    const top = layered(layered(layered(iterator, noting("a", log)), noting("b", log)), noting("c", log));
    expect(await collect(top)).toEqual([1, 2]);
    expect(log).toEqual(["a:1", "b:1", "c:1", "a:2", "b:2", "c:2", "a:done", "b:done", "c:done"]);
    expect(seen.reads).toBe(3);
  });

  it("maps items, waits for a layer's promise before the next item, and skips what a layer drops", async () => {
    const { iterator } = source([1, 2, 3, 4]);
    const order: string[] = [];
    const doubled = layered<number, number>(iterator, { step: (step) => (step.done ? step : { done: false, value: step.value * 2 }) });
    const slow = layered<number, string>(doubled, {
      step(step) {
        if (step.done) return step;
        if (step.value === 4) return SKIP;
        if (step.value === 6)
          return new Promise((resolve) =>
            setTimeout(() => {
              order.push("settled 6");
              resolve({ done: false, value: `n${step.value}` });
            }, 5),
          );
        return { done: false, value: `n${step.value}` };
      },
    });
    const top = layered<string, string>(slow, {
      step(step) {
        if (!step.done) order.push(`top ${step.value}`);
        return step;
      },
    });
    expect(await collect(top)).toEqual(["n2", "n6", "n8"]);
    expect(order).toEqual(["top n2", "settled 6", "top n6", "top n8"]);
  });

  it("gives an error from the bottom to each layer's error step in turn, and a layer may turn it into an item", async () => {
    const { iterator } = source([1], new Error("cut"));
    const log: string[] = [];
    const top = layered(layered(iterator, noting("a", log)), noting("b", log));
    await expect(collect(top)).rejects.toThrow("cut");
    expect(log).toEqual(["a:1", "b:1", "a:error cut", "b:error cut"]);

    const recovered = layered<number, number | string>(layered(source([1], new Error("cut")).iterator, noting("a", [])), {
      step: (step) => step,
      error: (error) => ({ done: false, value: `last: ${(error as Error).message}` }),
    });
    expect(await recovered.next()).toEqual({ done: false, value: 1 });
    expect(await recovered.next()).toEqual({ done: false, value: "last: cut" });
  });

  it("sends a throw of a layer's step to the error steps of the layers above, not its own", async () => {
    const log: string[] = [];
    const throwing: Layer<number, number> = {
      step(step) {
        if (!step.done && step.value === 2) throw new Error("bad item");
        return step;
      },
      error(error) {
        log.push(`own:${(error as Error).message}`);
        throw error;
      },
    };
    const top = layered(layered(source([1, 2]).iterator, throwing), noting("above", log));
    await expect(collect(top)).rejects.toThrow("bad item");
    expect(log).toEqual(["above:1", "above:error bad item"]);
  });

  it("stops top first, each layer choosing when the layers beneath stop, and the bottom once", async () => {
    const { iterator, seen } = source([1, 2, 3]);
    const log: string[] = [];
    const top = layered(layered(iterator, noting("a", log)), {
      step: (step) => step,
      async stop(below) {
        log.push("b:stop");
        await below();
        log.push("b:after");
      },
    });
    expect(await top.next()).toEqual({ done: false, value: 1 });
    expect(await top.return!()).toEqual({ done: true, value: undefined });
    expect(log).toEqual(["a:1", "b:stop", "a:stop", "b:after"]);
    expect(seen.stopped).toBe(1);
  });

  it("passes an item a layer already took (the routing relay's first chunk) through the layers stacked above it only", async () => {
    const { iterator, seen } = source([1, 2]);
    const log: string[] = [];
    const below = layered(iterator, noting("a", log));
    const first = await below.next();
    const top = layered(layered(below, noting("b", log), first), noting("c", log));
    expect(await collect(top)).toEqual([1, 2]);
    expect(log).toEqual(["a:1", "b:1", "c:1", "a:2", "b:2", "c:2", "a:done", "b:done", "c:done"]);
    expect(seen.reads).toBe(3);
  });

  it("works over any async iterator, and a next() that throws at once goes to the error steps", async () => {
    const log: string[] = [];
    const broken: AsyncIterator<number> = {
      next() {
        throw new Error("sync");
      },
    };
    await expect(layered(broken, noting("a", log)).next()).rejects.toThrow("sync");
    expect(log).toEqual(["a:error sync"]);
  });
});
