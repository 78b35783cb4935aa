import WebSocket from "ws";
import { openSocket } from "./vm.js";

export type StreamFrame = Record<string, any> & { type: string };

/** A `ws` client of `/gateway/v1/agents/stream` that records every frame and waits for ones it needs. */
export interface StreamClient {
  ws: WebSocket;
  frames: StreamFrame[];
  send(message: unknown): void;
  /** Resolves with the first frame (already received or future) matching `match`. */
  waitFor(match: (frame: StreamFrame) => boolean, timeoutMs?: number): Promise<StreamFrame>;
  /** Every frame of one run, once its `done` arrived. */
  run(runId: string): Promise<StreamFrame[]>;
  closed: Promise<{ code: number; reason: string }>;
  close(): Promise<void>;
}

export function agentStreamUrl(origin: string): string {
  return `${origin.replace(/^http/, "ws")}/gateway/v1/agents/stream`;
}

export async function connectStream(
  origin: string,
  options: WebSocket.ClientOptions & { protocols?: string[]; token?: string } = {},
): Promise<StreamClient> {
  const { token, ...rest } = options;
  const ws = await openSocket(
    agentStreamUrl(origin),
    token ? { ...rest, headers: { ...rest.headers, authorization: `Bearer ${token}` } } : rest,
  );
  const frames: StreamFrame[] = [];
  const waiters: { match: (frame: StreamFrame) => boolean; resolve: (frame: StreamFrame) => void }[] = [];
  ws.on("message", (data) => {
    const frame = JSON.parse(data.toString()) as StreamFrame;
    frames.push(frame);
    for (const waiter of [...waiters]) {
      if (!waiter.match(frame)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(frame);
    }
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  const waitFor = (match: (frame: StreamFrame) => boolean, timeoutMs = 5000) => {
    const seen = frames.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise<StreamFrame>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching frame in ${timeoutMs} ms; got ${JSON.stringify(frames)}`)), timeoutMs);
      waiters.push({
        match,
        resolve: (frame) => {
          clearTimeout(timer);
          resolve(frame);
        },
      });
    });
  };
  return {
    ws,
    frames,
    send: (message) => ws.send(typeof message === "string" ? message : JSON.stringify(message)),
    waitFor,
    async run(runId) {
      await waitFor((frame) => frame.type === "done" && frame.runId === runId);
      return frames.filter((frame) => frame.runId === runId);
    },
    closed,
    async close() {
      if (ws.readyState === WebSocket.CLOSED) return;
      ws.close();
      await closed;
    },
  };
}
