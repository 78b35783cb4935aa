/**
 * A buffered async iterable with one reader: the producer pushes without waiting, the
 * reader takes items in order. A reader that stops early drops what is left; the producer
 * carries on (an agent run does not depend on anyone watching it).
 */
export class EventQueue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #waiters: ((result: IteratorResult<T>) => void)[] = [];
  #closed = false;
  #detached = false;

  push(item: T): void {
    if (this.#closed || this.#detached) return;
    const waiter = this.#waiters.shift();
    if (waiter) waiter({ value: item, done: false });
    else this.#items.push(item);
  }

  close(): void {
    this.#closed = true;
    for (const waiter of this.#waiters.splice(0)) waiter({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.#items.length) return Promise.resolve({ value: this.#items.shift()!, done: false });
        if (this.#closed || this.#detached) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => this.#waiters.push(resolve));
      },
      return: async () => {
        this.#detached = true;
        this.#items = [];
        return { value: undefined, done: true };
      },
    };
  }
}
