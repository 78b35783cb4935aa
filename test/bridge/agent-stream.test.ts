import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mockUpstreams } from "../helpers/mock-upstreams.js";
import { callSignal } from "../../mocks/call-signal.js";
import { http, HttpResponse } from "msw";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { connectStream, agentStreamUrl, type StreamClient } from "../helpers/agent-stream.js";
import { openSse } from "../helpers/sse.js";
import { openSocket } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";

// A model provider that sends one chunk and then holds the stream open until the gateway aborts it.
const SLOW_BASE = "http://slow-model.test/v1";
const msw = mockUpstreams(
  http.post(`${SLOW_BASE}/chat/completions`, ({ request }) => {
    const aborted = new Promise<void>((resolve) => callSignal(request).addEventListener("abort", () => resolve(), { once: true }));
    const encoder = new TextEncoder();
    const chunk = {
      id: "c1",
      object: "chat.completion.chunk",
      created: 1,
      model: "slow",
      choices: [{ index: 0, delta: { role: "assistant", content: "thinking" }, finish_reason: null }],
    };
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`));
        // The caller is gone: end the body (an errored body would be an error in the mock server).
        void aborted.then(() => {
          try {
            controller.close();
          } catch {
            // already closed
          }
        });
      },
    });
    return new HttpResponse(stream, { headers: { "content-type": "text/event-stream" } });
  }),
);

let server: TestServer;
let token: string;
let apiKey: string;
let echoModel: string;
let agentId: string;
const sockets: StreamClient[] = [];

async function open(options: Parameters<typeof connectStream>[1] = {}): Promise<StreamClient> {
  const client = await connectStream(server.origin, { token, ...options });
  sockets.push(client);
  return client;
}

async function createAgent(as: string, model: string, name = "streamer") {
  const res = await server.request("/gateway/v1/agents", { method: "POST", headers: bearer(as), json: { name, model, tools: [] } });
  if (res.status !== 201) throw new Error(`agent create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({
      models: { "echo-1": { provider: "echo" }, "slow-1": { provider: "openai-compatible", baseURL: msw.url(SLOW_BASE) } },
    }),
  });
  const user = await registerUser(server);
  token = user.token;
  apiKey = (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(token), json: { name: "ws" } })).body.key;
  // The model comes from the runtime list, not a hard-coded id (docs/interface.md 9).
  const models = await server.request("/gateway/v1/models", { headers: bearer(token) });
  echoModel = models.body.data.find((model: { id: string }) => model.id.startsWith("echo")).id;
  agentId = await createAgent(token, echoModel);
});

afterAll(async () => {
  await Promise.all(sockets.map((socket) => socket.close()));
  expect(server.loggedErrors()).toEqual([]);
  await server?.close();
  await msw.close();
});

describe("authentication on the upgrade", () => {
  it("refuses an upgrade without a credential with 401 and the Gateway's error body", async () => {
    const refused = await openSocket(agentStreamUrl(server.origin)).catch((error) => error);
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body).error.code).toBe("UNAUTHORIZED");
    const bad = await openSocket(agentStreamUrl(server.origin), { headers: { authorization: "Bearer sk_not-a-real-key" } }).catch(
      (error) => error,
    );
    expect(bad.status).toBe(401);
  });

  it("accepts a session token in Authorization and an sk_ key in X-API-Key", async () => {
    const viaKey = await open({ token: undefined, headers: { "x-api-key": apiKey } });
    viaKey.send({ agentId, input: "key works" });
    const done = await viaKey.waitFor((frame) => frame.type === "done");
    expect(done.output).toBe("key works");
  });

  it("accepts `bearer.<token>` as a subprotocol for browsers and echoes only agent-stream.v1", async () => {
    const socket = await openSocket(agentStreamUrl(server.origin), { protocols: ["agent-stream.v1", `bearer.${token}`] });
    expect(socket.protocol).toBe("agent-stream.v1");
    socket.close();
  });

  it("refuses a browser origin outside GATEWAY_CORS_ORIGINS with 403", async () => {
    const strict = await startTestServer({ GATEWAY_CORS_ORIGINS: "https://app.example.com" });
    try {
      const { token: strictToken } = await registerUser(strict);
      const refused = await openSocket(agentStreamUrl(strict.origin), {
        headers: { ...bearer(strictToken), origin: "https://evil.example.com" },
      }).catch((e) => e);
      expect(refused.status).toBe(403);
      const allowed = await openSocket(agentStreamUrl(strict.origin), {
        headers: { ...bearer(strictToken), origin: "https://app.example.com" },
      });
      allowed.close();
    } finally {
      await strict.close();
    }
  });
});

describe("runs", () => {
  it("streams status, chunk and done frames, each with the runId", async () => {
    const socket = await open();
    socket.send({ agentId, input: "hello streaming world" });
    const status = await socket.waitFor((frame) => frame.type === "status");
    expect(status).toMatchObject({ type: "status", agentId, status: "running" });
    expect(status.runId).toMatch(/\S/);
    const frames = await socket.run(status.runId);
    const chunks = frames.filter((frame) => frame.type === "chunk");
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.map((frame) => frame.content).join("")).toBe("hello streaming world");
    const done = frames.at(-1)!;
    expect(done).toMatchObject({ type: "done", runId: status.runId, agentId, status: "completed", output: "hello streaming world" });
    expect(done.usage.total_tokens).toBeGreaterThan(0);
    expect(frames.every((frame) => frame.runId === status.runId)).toBe(true);
  });

  it("runs several invocations on one socket at once, told apart by runId and the client's id", async () => {
    const socket = await open();
    const inputs = ["alpha one", "beta two three", "gamma four five six"];
    for (const [i, input] of inputs.entries()) socket.send({ id: `req-${i}`, agentId, input });
    const dones = await Promise.all(inputs.map((_, i) => socket.waitFor((frame) => frame.type === "done" && frame.id === `req-${i}`)));
    expect(new Set(dones.map((done) => done.runId)).size).toBe(3);
    for (const [i, done] of dones.entries()) {
      const frames = socket.frames.filter((frame) => frame.runId === done.runId);
      expect(frames.every((frame) => frame.id === `req-${i}`)).toBe(true);
      expect(
        frames
          .filter((frame) => frame.type === "chunk")
          .map((frame) => frame.content)
          .join(""),
      ).toBe(inputs[i]);
      expect(done.output).toBe(inputs[i]);
    }
  });

  it("answers malformed messages with error frames and stays usable", async () => {
    const socket = await open();
    socket.send("this is not json");
    expect(await socket.waitFor((frame) => frame.type === "error")).toMatchObject({
      code: "BAD_REQUEST",
      status: 400,
      message: "Message is not valid JSON",
    });
    socket.send([1, 2]);
    socket.send({ id: "bad", agentId: 5, input: "x" });
    const invalid = await socket.waitFor((frame) => frame.type === "error" && frame.id === "bad");
    expect(invalid.code).toBe("VALIDATION_FAILED");
    expect(invalid.message).toContain("agentId");
    socket.send({ type: "dance", agentId });
    expect((await socket.waitFor((frame) => frame.type === "error" && /Unknown message type/.test(frame.message))).code).toBe(
      "BAD_REQUEST",
    );
    socket.send({ agentId, input: "still here" });
    expect((await socket.waitFor((frame) => frame.type === "done")).output).toBe("still here");
    expect(socket.frames.filter((frame) => frame.type === "error")).toHaveLength(4);
  });

  it("an unknown agent (or another user's) is a NOT_FOUND error frame", async () => {
    const other = await registerUser(server);
    const othersAgent = await createAgent(other.token, echoModel, "private");
    const socket = await open();
    socket.send({ id: "ghost", agentId: "agt_does_not_exist", input: "hi" });
    socket.send({ id: "theirs", agentId: othersAgent, input: "hi" });
    const ghost = await socket.waitFor((frame) => frame.id === "ghost");
    expect(ghost).toMatchObject({ type: "error", code: "NOT_FOUND", agentId: "agt_does_not_exist" });
    const theirs = await socket.waitFor((frame) => frame.id === "theirs");
    expect(theirs).toMatchObject({ type: "error", code: "NOT_FOUND" });
    expect(theirs.message).toBe(ghost.message.replace("agt_does_not_exist", othersAgent));
  });

  it("cancels a run whose client disconnects, through its AbortSignal, and logs it", async () => {
    const slowAgent = await createAgent(token, "slow-1", "slow");
    const socket = await open();
    socket.send({ agentId: slowAgent, input: "take your time" });
    const chunk = await socket.waitFor((frame) => frame.type === "chunk");
    expect(chunk.content).toBe("thinking");
    await socket.close();
    await eventually(() =>
      server
        .logs()
        .some((line) => line.event === "agent_stream.run_cancelled" && line.runId === chunk.runId && line.reason === "client_disconnected"),
    );
    const logs = await eventually(async () => {
      const res = await server.request(`/gateway/v1/agents/${slowAgent}/logs`, { headers: bearer(token) });
      return res.body.logs.find((entry: { event: string }) => entry.event === "invocation.finished");
    });
    expect(logs.data.status).toBe("cancelled");
  });

  it("cancels a run on request with {type: cancel, runId}", async () => {
    const slowAgent = await createAgent(token, "slow-1", "slow-cancel");
    const socket = await open();
    socket.send({ agentId: slowAgent, input: "wait" });
    const chunk = await socket.waitFor((frame) => frame.type === "chunk");
    socket.send({ type: "cancel", runId: chunk.runId });
    const done = await socket.waitFor((frame) => frame.type === "done" && frame.runId === chunk.runId);
    expect(done.status).toBe("cancelled");
    socket.send({ type: "cancel", runId: chunk.runId, id: "again" });
    expect((await socket.waitFor((frame) => frame.id === "again")).code).toBe("NOT_FOUND");
  });
});

describe("subscribe", () => {
  it("shows runs started elsewhere; a run started on the same socket is not repeated", async () => {
    const watcher = await open();
    watcher.send({ type: "subscribe", agentId, id: "sub" });
    expect(await watcher.waitFor((frame) => frame.type === "subscribed")).toMatchObject({ agentId, id: "sub" });

    // A run started over REST (POST /agents/{id}/invoke) on this instance.
    const invoked = await server.request(`/gateway/v1/agents/${agentId}/invoke`, {
      method: "POST",
      headers: bearer(token),
      json: { input: "from rest" },
    });
    expect(invoked.status).toBe(200);
    const frames = await watcher.run(invoked.body.runId);
    expect(frames.map((frame) => frame.type)).toEqual(expect.arrayContaining(["status", "chunk", "done"]));
    expect(frames.at(-1)).toMatchObject({ type: "done", output: "from rest", agentId });

    // Its own run arrives once, not twice.
    watcher.send({ agentId, input: "own run" });
    const own = await watcher.waitFor((frame) => frame.type === "done" && frame.output === "own run");
    // A run started elsewhere afterwards is seen through the subscription: by then a repeated
    // copy of the own run would have arrived too (one bus, in order).
    const after = await server.request(`/gateway/v1/agents/${agentId}/invoke`, {
      method: "POST",
      headers: bearer(token),
      json: { input: "after own" },
    });
    await watcher.waitFor((frame) => frame.type === "done" && frame.runId === after.body.runId);
    expect(watcher.frames.filter((frame) => frame.type === "done" && frame.runId === own.runId)).toHaveLength(1);

    watcher.send({ type: "unsubscribe", agentId });
    await watcher.waitFor((frame) => frame.type === "unsubscribed");
    // Another socket still subscribed sees the next run end: the unsubscribed one would have by then.
    const other = await open();
    other.send({ type: "subscribe", agentId });
    await other.waitFor((frame) => frame.type === "subscribed");
    const later = await server.request(`/gateway/v1/agents/${agentId}/invoke`, {
      method: "POST",
      headers: bearer(token),
      json: { input: "unseen" },
    });
    await other.waitFor((frame) => frame.type === "done" && frame.runId === later.body.runId);
    expect(watcher.frames.some((frame) => frame.runId === later.body.runId)).toBe(false);
  });

  it("refuses to subscribe to another user's agent", async () => {
    const other = await registerUser(server);
    const othersAgent = await createAgent(other.token, echoModel, "hidden");
    const socket = await open();
    socket.send({ type: "subscribe", agentId: othersAgent });
    expect(await socket.waitFor((frame) => frame.type === "error")).toMatchObject({ code: "NOT_FOUND", agentId: othersAgent });
  });
});

describe("orchestrator-proxy mode", () => {
  it("answers every message with an error frame pointing to GET /agents/{name}/stream", async () => {
    const proxied = await startTestServer({ ORCH_BASE_URL: "http://orchestrator.test" });
    try {
      const { token: proxiedToken } = await registerUser(proxied);
      const socket = await connectStream(proxied.origin, { token: proxiedToken });
      socket.send({ agentId: "builder", input: "hi", id: "x" });
      const error = await socket.waitFor((frame) => frame.type === "error");
      expect(error).toMatchObject({ code: "UNAVAILABLE", id: "x" });
      expect(error.message).toContain("GET /gateway/v1/agents/{name}/stream");
      await socket.close();
    } finally {
      await proxied.close();
    }
  });
});

describe("the stream's operations as methods (REST)", () => {
  it("POST /agents/runs/{run_id}/cancel ends the owner's run; another user's cancel is the same 404 as an unknown run and changes nothing", async () => {
    const slowAgent = await createAgent(token, "slow-1", "slow-rest-cancel");
    const socket = await open();
    socket.send({ agentId: slowAgent, input: "wait" });
    const chunk = await socket.waitFor((frame) => frame.type === "chunk");

    const other = await registerUser(server);
    const theirs = await server.request(`/gateway/v1/agents/runs/${chunk.runId}/cancel`, { method: "POST", headers: bearer(other.token) });
    const missing = await server.request("/gateway/v1/agents/runs/run_does_not_exist/cancel", {
      method: "POST",
      headers: bearer(other.token),
    });
    expect(theirs.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(theirs.body.error.message.replace(chunk.runId, "X")).toBe(missing.body.error.message.replace("run_does_not_exist", "X"));
    expect(socket.frames.some((frame) => frame.type === "done" && frame.runId === chunk.runId)).toBe(false);

    const mine = await server.request(`/gateway/v1/agents/runs/${chunk.runId}/cancel`, { method: "POST", headers: bearer(token) });
    expect(mine.status).toBe(200);
    expect(mine.body).toEqual({ runId: chunk.runId, agentId: slowAgent, cancelled: true });
    expect((await socket.waitFor((frame) => frame.type === "done" && frame.runId === chunk.runId)).status).toBe("cancelled");
    // Ended runs are gone: the same 404.
    await eventually(
      async () =>
        (await server.request(`/gateway/v1/agents/runs/${chunk.runId}/cancel`, { method: "POST", headers: bearer(token) })).status === 404,
    );
  });

  it("GET /agents/{agent_id}/events streams the agent's runs over SSE; another user's agent is the same 404 as a missing one", async () => {
    const sse = await openSse(server.url(`/gateway/v1/agents/${agentId}/events`), bearer(token));
    try {
      expect(sse.status).toBe(200);
      expect(sse.headers["content-type"]).toContain("text/event-stream");
      // The first event says the subscription is live: runs started after it are seen.
      expect(await sse.waitFor(() => true)).toEqual({ type: "subscribed", agentId });
      const invoked = await server.request(`/gateway/v1/agents/${agentId}/invoke`, {
        method: "POST",
        headers: bearer(token),
        json: { input: "watched over sse" },
      });
      expect(invoked.status).toBe(200);
      const done = await sse.waitFor((event) => event.type === "done" && event.runId === invoked.body.runId);
      expect(done).toMatchObject({ result: { status: "completed", output: "watched over sse" } });
      expect(sse.events.filter((event) => event.runId === invoked.body.runId).map((event) => event.type)).toEqual(
        expect.arrayContaining(["status", "chunk", "done"]),
      );
    } finally {
      sse.close();
    }

    const other = await registerUser(server);
    const theirs = await server.request(`/gateway/v1/agents/${agentId}/events`, { headers: bearer(other.token) });
    const missing = await server.request("/gateway/v1/agents/agt_missing/events", { headers: bearer(other.token) });
    expect(theirs.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(theirs.body.error.code).toBe(missing.body.error.code);
  });
});
