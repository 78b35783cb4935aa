import type { IncomingMessage, ServerResponse } from "node:http";
// The event loop's own turns, whatever a test does to the global timers (fake timers replace
// the globals, not node:timers' exports): a faked setImmediate would hold a request forever.
import { setImmediate, setTimeout } from "node:timers";

/** How long one turn of the event loop may spend starting new requests before the rest wait for the next turn. */
export const ADMISSION_SLICE_MS = 10;

type Handle = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Spreads a burst of new requests over turns of the event loop (docs/performance.md "Bursts").
 *
 * libuv hands the server every socket that became readable in one poll, and each request's
 * admission (authentication, limits, the hold; with memory storage all of it without I/O)
 * runs in its socket's callback. A thousand requests arriving at once would then hold the
 * loop for the whole batch, and the timers and the frames of the streams already open would
 * wait behind it. Here a turn starts requests until it has spent `sliceMs` on them; the next
 * ones wait, in arrival order, for the following turns, each started in its own `setImmediate`
 * (Node runs the promise steps of one before the next) and each turn again up to `sliceMs`.
 * A turn is over when a zero-delay timer fires: timers run at the start of the next turn.
 * Nothing is dropped or reordered, and with no burst every request starts at once, as before.
 */
export function pacedRequests(handle: Handle, sliceMs = ADMISSION_SLICE_MS, now: () => number = () => performance.now()): Handle {
  /** When this turn started its first request; undefined once the turn is over. */
  let sliceStart: number | undefined;
  /** Requests waiting for a later turn: while any wait, new ones queue behind them. */
  let waiting = 0;
  const endTurn = () => {
    sliceStart = undefined;
  };
  /** True when this turn may still start a request (and starts the turn's clock if it is the first). */
  const mayStart = () => {
    if (sliceStart === undefined) {
      sliceStart = now();
      setTimeout(endTurn, 0).unref();
      return true;
    }
    return now() - sliceStart < sliceMs;
  };
  const later = (req: IncomingMessage, res: ServerResponse) => {
    // Still this turn, and its time spent: the next turn (an immediate set from an immediate runs then).
    if (!mayStart()) {
      setImmediate(later, req, res);
      return;
    }
    waiting -= 1;
    handle(req, res);
  };
  return (req, res) => {
    if (waiting === 0 && mayStart()) {
      handle(req, res);
      return;
    }
    waiting += 1;
    setImmediate(later, req, res);
  };
}
