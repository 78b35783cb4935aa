import { createServer } from "node:http";
import { pipeline } from "node:stream";
import { listenReady } from "./fork-ready.js";
import { answerLoopDelay } from "./loop-delay.js";
import { Agent } from "undici";

/**
 * The least a Node gateway in front of an OpenAI-compatible provider does, for the chat
 * benchmarks' `floor` row: a `node:http` server that reads the JSON body, checks one bearer
 * key by string comparison, parses the body, sends it upstream through a kept-alive undici
 * `Agent` with `request()` (the gateway's own client), parses the answer and writes it back;
 * a streamed answer (`"stream": true`) is piped to the client byte for byte as it arrives.
 * No storage, limits, metering, logs or metrics. What it costs per request is what Node's
 * HTTP server and client cost on this machine, below which no Node gateway goes.
 * Env: UPSTREAM (the mock's origin), KEY. Prints `READY <origin>`.
 */
const upstream = `${process.env.UPSTREAM}/v1/chat/completions`;
const key = `Bearer ${process.env.KEY ?? "floor"}`;
const agent = new Agent({ keepAliveTimeout: 60_000, connections: Number(process.env.FLOOR_CONNECTIONS ?? 256) });

const server = createServer((req, res) => {
  if (req.headers.authorization !== key) {
    res.writeHead(401, { "content-type": "application/json" }).end('{"error":{"message":"no"}}');
    return;
  }
  const parts: Buffer[] = [];
  req.on("data", (part: Buffer) => parts.push(part));
  req.on("end", async () => {
    try {
      const body = JSON.parse(Buffer.concat(parts).toString("utf8")) as { model: string; stream?: boolean };
      const answer = await agent.request({
        origin: upstream.slice(0, upstream.indexOf("/v1")),
        path: "/v1/chat/completions",
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      if (body.stream) {
        res.writeHead(answer.statusCode, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        pipeline(answer.body, res, () => undefined);
        return;
      }
      const parsed = (await answer.body.json()) as Record<string, unknown>;
      parsed.model = body.model;
      const out = JSON.stringify(parsed);
      res.writeHead(answer.statusCode, { "content-type": "application/json", "content-length": Buffer.byteLength(out) }).end(out);
    } catch (error) {
      res.writeHead(502, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: String(error) } }));
    }
  });
});
listenReady(server);
answerLoopDelay();
