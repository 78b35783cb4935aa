import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

export type Answer = number | "hang" | "redirect" | "huge";

export interface Received {
  /** The request's path (each test's subscriptions point at paths of their own). */
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The parsed payload, when the signature verified against one of `secrets`. */
  verified: unknown;
  error?: string;
  /** When its body had arrived (performance.now()). */
  at: number;
}

/**
 * A webhook receiver on 127.0.0.1: verifies every request with standardwebhooks'
 * `Webhook.verify` against the secrets it is given, and answers from a queue of cues (a
 * status, `hang`, a `redirect`, a `huge` body), 200 once the queue is empty.
 */
export async function startReceiver() {
  const received: Received[] = [];
  const answers: Answer[] = [];
  const secrets: string[] = [];
  const hanging = new Set<() => void>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      let verified: unknown;
      let error: string | undefined;
      for (const secret of secrets) {
        try {
          verified = new Webhook(secret).verify(body, req.headers as Record<string, string>);
          error = undefined;
          break;
        } catch (e) {
          error = String(e);
        }
      }
      received.push({ path: req.url ?? "", headers: req.headers, body, verified, error, at: performance.now() });
      const answer = answers.shift() ?? 200;
      if (answer === "hang") {
        hanging.add(() => res.destroy());
        return;
      }
      if (answer === "redirect") {
        res.writeHead(302, { location: "http://127.0.0.1:1/elsewhere" }).end();
        return;
      }
      if (answer === "huge") {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("x".repeat(5 * 1024 * 1024));
        return;
      }
      res.writeHead(answer, { "content-type": "application/json" }).end(JSON.stringify({ answer }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    received,
    answers,
    secrets,
    async close() {
      for (const end of hanging) end();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
