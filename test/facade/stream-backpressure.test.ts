import { http, HttpResponse } from "msw";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callSignal } from "../../mocks/call-signal.js";
import { serveMockUpstreams, type MockUpstreams } from "../helpers/mock-upstreams.js";
import { registerUser, startTestServer, type TestServer } from "../helpers/server.js";

/**
 * A provider's stream relayed to a client over a real socket (facade/transport/sse.ts, rpc/sse-parse.ts):
 * a client that does not read holds the upstream back, everything arrives in order once it
 * reads, and a client that goes away stops the upstream.
 */

const UPSTREAM = "http://slow-reader.upstream.test/v1";
/** 2,000 frames of about 20 KB: several times what loopback's socket buffers hold. */
const FRAMES = 2_000;
const PADDING = "x".repeat(20_000);
const encoder = new TextEncoder();

let msw: MockUpstreams;
let server: TestServer;
let token: string;
const client = new Agent();
/** Per upstream request: the frames the mock was asked for, and whether its stream was cancelled. */
const upstreams: Array<{ produced: number; cancelled: boolean }> = [];

const frame = (body: unknown) => encoder.encode(`data: ${JSON.stringify(body)}\n\n`);
const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  id: "up",
  object: "chat.completion.chunk",
  created: 1,
  model: "upstream-model",
  choices: [{ index: 0, delta, finish_reason: finish }],
});

beforeAll(async () => {
  msw = await serveMockUpstreams(
    http.post(`${UPSTREAM}/chat/completions`, ({ request }) => {
      const state = { produced: 0, cancelled: false };
      upstreams.push(state);
      // The gateway's connection closing (the mock server aborts this signal then).
      callSignal(request).addEventListener("abort", () => (state.cancelled = true), { once: true });
      // Made as the reader asks for it: what the gateway has not read is never produced.
      const stream = new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            if (state.produced < FRAMES) {
              controller.enqueue(frame(chunk({ content: `${state.produced}|${PADDING}` })));
              state.produced++;
              return;
            }
            controller.enqueue(frame(chunk({}, "stop")));
            controller.enqueue(encoder.encode("data: [DONE]\n\n"));
            controller.close();
          },
        },
        { highWaterMark: 0 },
      );
      return new HttpResponse(stream, { headers: { "content-type": "text/event-stream" } });
    }),
  );
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({
      models: { relayed: { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), upstreamModel: "upstream-model" } },
    }),
  });
  token = (await registerUser(server)).token;
}, 30_000);

afterAll(async () => {
  await client.close();
  await server?.close();
  await msw?.close();
});

/** A streamed chat request whose answer nobody reads until told to: the client stops reading its socket. */
async function unreadStream() {
  const answer = await request(server.url("/gateway/v1/chat/completions"), {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "relayed", messages: [{ role: "user", content: "go" }], stream: true }),
    dispatcher: client,
  });
  expect(answer.statusCode).toBe(200);
  return answer.body;
}

/** Waits until `read()` has given the same value for ten polls in a row (the pipe is full and still). */
async function settled(read: () => number): Promise<number> {
  let last = -1;
  let same = 0;
  while (same < 10) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const now = read();
    same = now === last ? same + 1 : 0;
    last = now;
  }
  return last;
}

describe("a streamed answer to a client that reads slowly", () => {
  it("holds the upstream back while the client does not read, then delivers every frame in order", async () => {
    const body = await unreadStream();
    const upstream = upstreams.at(-1)!;
    const held = await settled(() => upstream.produced);
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(FRAMES / 2);

    const text = await body.text();
    const order = [...text.matchAll(/"content":"(\d+)\|/g)].map((match) => Number(match[1]));
    expect(order.length).toBe(FRAMES);
    expect(order.every((value, index) => value === index)).toBe(true);
    expect(text).toContain('"model":"relayed"');
    expect(text).not.toContain("upstream-model");
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(upstream).toEqual({ produced: FRAMES, cancelled: false });
  }, 30_000);

  it("stops the upstream when the client goes away mid-stream", async () => {
    const body = await unreadStream();
    const upstream = upstreams.at(-1)!;
    await settled(() => upstream.produced);
    body.destroy();
    while (!upstream.cancelled) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(upstream.produced).toBeLessThan(FRAMES);
  }, 30_000);
});
