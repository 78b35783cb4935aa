import type { IncomingMessage, ServerResponse } from "node:http";
import { setTimeout as realDelay } from "node:timers/promises";
import { describe, expect, it, vi } from "vitest";
import { pacedRequests } from "../../facade/transport/pacing.js";

/**
 * A burst of new requests is started over several turns of the event loop
 * (facade/transport/pacing.ts). The clock is the test's: each request "costs" 2 ms of it, so
 * what one turn starts does not depend on the machine's speed.
 */

const request = (id: number) => ({ id }) as unknown as IncomingMessage;
const response = {} as ServerResponse;
const idOf = (req: IncomingMessage) => (req as unknown as { id: number }).id;

/** Resolves once `done()` holds, checked every millisecond: the turns take real time, more on a busy machine. */
function until(done: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = () => (done() ? resolve() : setTimeout(check, 1));
    check();
  });
}

function paced(costMs: number) {
  let clock = 0;
  const started: number[] = [];
  const admit = pacedRequests(
    (req) => {
      started.push(idOf(req));
      clock += costMs;
    },
    10,
    () => clock,
  );
  return { admit, started };
}

describe("pacedRequests", () => {
  it("starts requests at once while a turn has time left", () => {
    const { admit, started } = paced(1);
    for (let id = 1; id <= 5; id += 1) admit(request(id), response);
    expect(started).toEqual([1, 2, 3, 4, 5]);
  });

  it("starts the rest of a burst in later turns, in arrival order, with timers running in between", async () => {
    const { admit, started } = paced(2);
    // A timer due now, as the frames of an open stream or an upstream timeout would be.
    const timerSaw = new Promise<number>((resolve) => setTimeout(() => resolve(started.length), 0));
    for (let id = 1; id <= 20; id += 1) admit(request(id), response);
    // The first 10 ms of the clock: five requests; the other fifteen wait.
    expect(started).toEqual([1, 2, 3, 4, 5]);
    // The timer ran before the burst was through.
    expect(await timerSaw).toBeLessThan(20);
    // A request arriving while others wait queues behind them.
    admit(request(21), response);
    await until(() => started.length === 21);
    expect(started).toEqual(Array.from({ length: 21 }, (_, index) => index + 1));
  });

  it("once a burst is through, a new turn starts a request at once", async () => {
    const { admit, started } = paced(2);
    for (let id = 1; id <= 6; id += 1) admit(request(id), response);
    expect(started).toEqual([1, 2, 3, 4, 5]);
    await until(() => started.length === 6);
    expect(started).toEqual([1, 2, 3, 4, 5, 6]);
    // Nothing waits: a new turn starts a new request at once.
    admit(request(7), response);
    expect(started).toContain(7);
  });

  it("runs a burst through while a test fakes the global timers", async () => {
    const { admit, started } = paced(2);
    vi.useFakeTimers();
    try {
      for (let id = 1; id <= 12; id += 1) admit(request(id), response);
      expect(started.length).toBe(5);
      // node:timers' own delay: the faked globals never fire on their own.
      while (started.length < 12) await realDelay(1);
      expect(started).toEqual(Array.from({ length: 12 }, (_, index) => index + 1));
    } finally {
      vi.useRealTimers();
    }
  });
});
