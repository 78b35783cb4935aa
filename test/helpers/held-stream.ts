import { createServer, type ServerResponse } from "node:http";

/**
 * An OpenAI-compatible upstream on a loopback port whose streamed answers send one chunk and
 * then stay open until `finish()`: streams in flight for as long as a test needs them, from
 * the test process or from instances in child processes.
 */
export interface HeldUpstream {
  /** The model's `baseURL`. */
  url: string;
  /** Streams the upstream holds open now. */
  open(): number;
  /** Ends every held stream (finish chunk, usage, [DONE]). */
  finish(): void;
  close(): Promise<void>;
}

const chunk = (data: unknown) => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;

export async function startHeldUpstream(): Promise<HeldUpstream> {
  const held = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    if (!req.url?.endsWith("/chat/completions")) {
      res.writeHead(404).end();
      return;
    }
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(
        chunk({
          id: "held",
          object: "chat.completion.chunk",
          created: 0,
          model: "held",
          choices: [{ index: 0, delta: { role: "assistant", content: "held " }, finish_reason: null }],
        }),
      );
      held.add(res);
      res.once("close", () => held.delete(res));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/v1`,
    open: () => held.size,
    finish() {
      for (const res of held) {
        res.write(
          chunk({
            id: "held",
            object: "chat.completion.chunk",
            created: 0,
            model: "held",
            choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
          }),
        );
        res.write(
          chunk({
            id: "held",
            object: "chat.completion.chunk",
            created: 0,
            model: "held",
            choices: [],
            usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
          }),
        );
        res.end(chunk("[DONE]"));
      }
      held.clear();
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * POSTs a streamed request and, when it is answered 200, reads until its first `data:` frame:
 * the stream is then in flight. `cancel()` hangs up as a client going away does.
 */
export async function openStream(url: string, headers: Record<string, string>, body: unknown) {
  const controller = new AbortController();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  if (res.status !== 200)
    return { status: res.status, headers: res.headers, body: (await res.json()) as any, cancel: () => undefined, rest: async () => "" };
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("data:")) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return {
    status: res.status,
    headers: res.headers,
    body: undefined as any,
    cancel: () => controller.abort(),
    /** Reads the rest of the stream. */
    async rest() {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return text;
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}
