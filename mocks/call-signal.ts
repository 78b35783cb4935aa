/**
 * The abort signal of a mocked upstream call. A handler served in-process by msw's
 * `setupServer` sees the caller abort through `request.signal`; a handler served on a loopback
 * port (test/helpers/mock-upstreams.ts) gets a fresh `Request` whose signal never fires, so
 * the server registers a signal that aborts when the caller's socket closes early and names it
 * in a request header. Handlers ask here, and work under both.
 */
export const CALL_HEADER = "x-mock-call-id";

const signals = new Map<string, AbortSignal>();

export function registerCallSignal(id: string, signal: AbortSignal): () => void {
  signals.set(id, signal);
  return () => signals.delete(id);
}

export function callSignal(request: Request): AbortSignal {
  const id = request.headers.get(CALL_HEADER);
  return (id && signals.get(id)) || request.signal;
}
