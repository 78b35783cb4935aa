import { connect } from "node:net";
import { mockUpstreams } from "../helpers/mock-upstreams.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { http, HttpResponse } from "msw";
import { bearer, startTestServer, type TestServer } from "../helpers/server.js";
import { loopbackFetch, platformAccount, sseData, type PlatformAccount } from "../helpers/chat.js";
import { createOpenAiUpstream } from "../../mocks/openai-upstream.js";
import { eventually } from "../helpers/eventually.js";
import { connectStream } from "../helpers/agent-stream.js";
import { connectVm, vmSocketUrl } from "../helpers/vm.js";
import { registerUser } from "../helpers/server.js";

/** Issue 13 "Graceful drain": in-flight requests and streams finish; new connections are refused. */

const UPSTREAM = "http://drain.upstream.test/v1";
const SLOW_JSON = "http://slow-json.upstream.test/v1";
const upstream = createOpenAiUpstream(UPSTREAM);
let releaseJson: () => void = () => undefined;
let jsonCalls = 0;
const msw = mockUpstreams(
  ...upstream.handlers,
  http.post(`${SLOW_JSON}/chat/completions`, async () => {
    jsonCalls += 1;
    await new Promise<void>((resolve) => (releaseJson = resolve));
    return HttpResponse.json({
      id: "chatcmpl-slow",
      object: "chat.completion",
      created: 1,
      model: "vendor-json",
      choices: [{ index: 0, message: { role: "assistant", content: "slow answer" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    });
  }),
);

const MODELS = () =>
  JSON.stringify({
    models: {
      "slow-stream": { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), upstreamModel: "vendor-stream" },
      "slow-json": { provider: "openai-compatible", baseURL: msw.url(SLOW_JSON), upstreamModel: "vendor-json" },
      hanging: { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), upstreamModel: "vendor-hang" },
    },
  });

function refused(origin: string): Promise<boolean> {
  const { port } = new URL(origin);
  return new Promise((resolve) => {
    const socket = connect(Number(port), "127.0.0.1");
    socket.once("connect", () => (socket.destroy(), resolve(false)));
    socket.once("error", () => resolve(true));
  });
}

const chat = (server: TestServer, account: PlatformAccount, body: Record<string, unknown>) =>
  loopbackFetch(server.url("/api/v1/chat/completions"), {
    method: "POST",
    headers: { ...bearer(account.key), "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }),
  });

beforeAll(() => msw.listen());
afterAll(() => msw.close());

describe("drain", () => {
  it("lets a request and a stream in flight finish with 200 and [DONE], refusing new connections", async () => {
    const server = await startTestServer({ MODELS_JSON: MODELS() });
    const account = await platformAccount(server);
    let releaseStream!: () => void;
    upstream.script("vendor-stream", {
      kind: "stream",
      words: ["one", " two", " three"],
      holdBeforeEnd: new Promise<void>((resolve) => (releaseStream = resolve)),
    });

    const json = chat(server, account, { model: "slow-json" });
    const stream = chat(server, account, { model: "slow-stream", stream: true });
    await eventually(() => {
      expect(jsonCalls).toBe(1);
      expect(upstream.calls).toHaveLength(1);
      return true;
    });

    const drained = server.drain(10_000);
    expect(server.lifecycle.draining).toBe(true);
    await eventually(async () => expect(await refused(server.origin)).toBe(true));

    setTimeout(() => (releaseJson(), releaseStream()), 200);
    const jsonResponse = await json;
    expect(jsonResponse.status).toBe(200);
    expect(((await jsonResponse.json()) as any).choices[0].message.content).toBe("slow answer");
    const streamResponse = await stream;
    expect(streamResponse.status).toBe(200);
    const frames = sseData(await streamResponse.text());
    expect(frames.at(-1)).toBe("[DONE]");
    expect(
      frames
        .slice(0, -1)
        .map((frame) => JSON.parse(frame).choices[0]?.delta?.content ?? "")
        .join(""),
    ).toBe("one two three");
    await drained;
    await server.close();
  });

  it("cuts what is still running when the grace period ends", async () => {
    const server = await startTestServer({ MODELS_JSON: MODELS() });
    const account = await platformAccount(server);
    upstream.script("vendor-hang", { kind: "hang" });
    const hanging = chat(server, account, { model: "hanging" }).then(
      (response) => response.text().then(() => response.status),
      () => "cut",
    );
    await eventually(() => expect(upstream.calls.some((call) => call.body.model === "vendor-hang")).toBe(true));
    const started = Date.now();
    await server.drain(300);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await hanging).toBe("cut");
    server.allowLoggedErrors(() => true);
    await server.close();
  });

  it("closes agent streams and VM sockets with 1001 so clients reconnect elsewhere", async () => {
    const server = await startTestServer();
    const user = await registerUser(server);
    const stream = await connectStream(server.origin, { token: user.token });
    const vm = await connectVm(vmSocketUrl(server.origin, "agent-1", { vmId: "vm-drain" }), user.token);
    await server.drain(1000);
    expect((await stream.closed).code).toBe(1001);
    expect((await vm.closed).code).toBe(1001);
    await server.close();
  });

  it("answers /readyz 503 with the reason while draining; /healthz needs nothing", async () => {
    const server = await startTestServer();
    expect((await server.request("/healthz")).body).toEqual({ status: "ok" });
    expect((await server.request("/readyz")).body).toEqual({ status: "ready", storage: "memory" });
    server.lifecycle.draining = true;
    const ready = await server.request("/readyz");
    expect(ready.status).toBe(503);
    expect(ready.body.reason).toMatch(/draining/);
    // Probes are not logged at info.
    expect(server.logs().filter((line) => String(line.path ?? "").match(/healthz|readyz/))).toEqual([]);
    server.lifecycle.draining = false;
    await server.close();
  });
});
