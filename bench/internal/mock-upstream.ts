import { createServer } from "node:http";
import { listenReady } from "./fork-ready.js";

/**
 * A minimal OpenAI-compatible upstream for the chat benchmarks, in its own process: every
 * POST …/chat/completions waits MOCK_LATENCY_MS (default 2) and answers a fixed completion,
 * as JSON or, when the body has `"stream": true`, as SSE chunks ending with a usage chunk and
 * `[DONE]`. Prints `READY <origin>`.
 *
 * Long streams (bench/streams.ts): with MOCK_STREAM_CHUNKS set, a stream is a role chunk,
 * that many content chunks MOCK_STREAM_GAP_MS apart (default 100), a finish chunk, the usage
 * chunk and `[DONE]`, each written as its own frame the moment it is due.
 *
 * `GET /arrivals` (bench/redis-chat.ts) answers the times (epoch µs) at which the chat
 * requests since the last call arrived, so a benchmark can tell which of the gateway's storage
 * commands came before the upstream call.
 */
const LATENCY_MS = Number(process.env.MOCK_LATENCY_MS ?? 2);
const LONG_CHUNKS = Number(process.env.MOCK_STREAM_CHUNKS ?? 0);
const GAP_MS = Number(process.env.MOCK_STREAM_GAP_MS ?? 100);
const WORDS = ["Hello", " from", " the", " mock", " model", "."];
const USAGE = { prompt_tokens: 12, completion_tokens: WORDS.length, total_tokens: 12 + WORDS.length };
const CREATED = Math.floor(Date.now() / 1000);

const completion = JSON.stringify({
  id: "chatcmpl-mock",
  object: "chat.completion",
  created: CREATED,
  model: "mock",
  choices: [{ index: 0, message: { role: "assistant", content: WORDS.join("") }, finish_reason: "stop" }],
  usage: USAGE,
});

const chunk = (delta: Record<string, unknown>, finish: string | null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-mock", object: "chat.completion.chunk", created: CREATED, model: "mock", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const usageFrame = (usage: typeof USAGE) =>
  `data: ${JSON.stringify({ id: "chatcmpl-mock", object: "chat.completion.chunk", created: CREATED, model: "mock", choices: [], usage })}\n\n`;
const frames = [
  chunk({ role: "assistant", content: "" }, null),
  ...WORDS.map((word) => chunk({ content: word }, null)),
  chunk({}, "stop"),
  usageFrame(USAGE),
  "data: [DONE]\n\n",
];
/** A long stream's frames: role, LONG_CHUNKS content chunks (one token each), finish, usage, [DONE]. */
const longHead = chunk({ role: "assistant", content: "" }, null);
const longToken = chunk({ content: " token" }, null);
const longTail = [
  chunk({}, "stop"),
  usageFrame({ prompt_tokens: 12, completion_tokens: LONG_CHUNKS, total_tokens: 12 + LONG_CHUNKS }),
  "data: [DONE]\n\n",
].join("");

const arrivals: number[] = [];
const nowMicros = () => Math.round((performance.timeOrigin + performance.now()) * 1000);

const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/arrivals") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(arrivals.splice(0)));
    return;
  }
  if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
    res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"message":"not found"}}');
    return;
  }
  if (arrivals.length < 1000) arrivals.push(nowMicros());
  const parts: Buffer[] = [];
  req.on("data", (part: Buffer) => parts.push(part));
  req.on("end", () => {
    const stream = Buffer.concat(parts).includes('"stream":true');
    setTimeout(() => {
      if (!stream) {
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(completion) }).end(completion);
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      if (LONG_CHUNKS > 0) {
        res.write(longHead);
        let sent = 0;
        const timer = setInterval(() => {
          if (sent++ < LONG_CHUNKS) res.write(longToken);
          else {
            clearInterval(timer);
            res.end(longTail);
          }
        }, GAP_MS);
        res.once("close", () => clearInterval(timer));
        return;
      }
      for (const frame of frames) res.write(frame);
      res.end();
    }, LATENCY_MS);
  });
});
listenReady(server);
