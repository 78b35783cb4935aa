/**
 * A stream of chat chunks retold as a dialect's events (docs/dialects.md). The wrapper keeps the
 * chat stream's own ending: a client gone before the first event, or at any point, ends the
 * chat stream too, so a dropped request is settled for what was sent and its stream place
 * given back (rpc/chat/run-chat.ts, docs/quotas.md) whatever the dialect had already said.
 */
export function retold<T, U>(chunks: AsyncIterable<T>, tell: (chunks: AsyncIterable<T>) => AsyncGenerator<U>): AsyncIterable<U> {
  return {
    [Symbol.asyncIterator]() {
      const inner = chunks[Symbol.asyncIterator]();
      const events = tell({ [Symbol.asyncIterator]: () => inner });
      return {
        next: () => events.next(),
        async return(value?: unknown) {
          try {
            return await events.return(value as never);
          } finally {
            // A second return on an iterator that ended is a no-op (rpc/chat/run-chat.ts, rpc/quotas.ts endingWith).
            await inner.return?.();
          }
        },
        throw: (error?: unknown) => events.throw(error),
      };
    },
  };
}
