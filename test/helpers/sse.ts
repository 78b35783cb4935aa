import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import { eventually } from "./eventually.js";

export interface SseClient {
  status: number;
  headers: IncomingMessage["headers"];
  /** Every `data:` payload so far, parsed as JSON where it is JSON. */
  events: any[];
  /** Resolves with the first event (past or future) that matches. */
  waitFor(match: (event: any) => boolean, timeoutMs?: number): Promise<any>;
  close(): void;
}

/**
 * Opens a server-sent event stream with node:http and collects its events as they arrive
 * (undici's fetch may hold back small chunks of a long-lived stream served by the same process).
 */
export function openSse(url: string, headers: Record<string, string>): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const req: ClientRequest = httpRequest(url, { headers: { accept: "text/event-stream", ...headers } }, (res) => {
      const events: any[] = [];
      let buffer = "";
      res.setEncoding("utf8");
      res.on("data", (text: string) => {
        buffer += text;
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          for (const line of frame.split("\n")) {
            if (!line.startsWith("data: ")) continue;
            const data = line.slice(6);
            try {
              events.push(JSON.parse(data));
            } catch {
              events.push(data);
            }
          }
        }
      });
      res.on("error", () => undefined);
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        waitFor: (match, timeoutMs = 5000) => eventually(() => events.find(match), timeoutMs),
        close: () => req.destroy(),
      });
    });
    req.on("error", reject);
    req.end();
  });
}
