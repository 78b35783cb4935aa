import { afterAll, beforeAll, expect, it } from "vitest";
import { TEST_JWT_SECRET, TEST_DATA_SECRET, newUserBody } from "../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { startInstance, instanceRequest, type Instance } from "../helpers/instances.js";
import { connectStream, type StreamClient } from "../helpers/agent-stream.js";

const prefix = uniqueRedisPrefix();
let a: Instance;
let b: Instance;
const sockets: StreamClient[] = [];

const request = instanceRequest;

beforeAll(async () => {
  const env = {
    STORAGE: "redis",
    REDIS_PREFIX: prefix,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    LOG_LEVEL: "error",
  };
  [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
}, 60_000);

afterAll(async () => {
  await Promise.all(sockets.map((socket) => socket.close()));
  await Promise.all([a?.stop(), b?.stop()]);
  await dropRedisPrefix(prefix);
});

it("a client on instance B subscribed to an agent sees runs started on instance A, frame for frame", async () => {
  const token = (await request(a.origin, "/gateway/v1/auth/register", { method: "POST", json: newUserBody() })).body.token as string;
  const models = await request(a.origin, "/gateway/v1/models", { token });
  const model = models.body.data.find((entry: { id: string }) => entry.id.startsWith("echo")).id as string;
  const created = await request(a.origin, "/gateway/v1/agents", { method: "POST", token, json: { name: "shared", model, tools: [] } });
  expect(created.status).toBe(201);
  const agentId = created.body.id as string;

  const watcher = await connectStream(b.origin, { token });
  const runner = await connectStream(a.origin, { token });
  sockets.push(watcher, runner);
  watcher.send({ type: "subscribe", agentId });
  await watcher.waitFor((frame) => frame.type === "subscribed");

  // A run started over the socket on A.
  runner.send({ agentId, input: "across two instances" });
  const started = await runner.waitFor((frame) => frame.type === "status");
  const onA = await runner.run(started.runId);
  const onB = await watcher.run(started.runId);
  expect(onB.map((frame) => frame.type)).toEqual(onA.map((frame) => frame.type));
  expect(
    onB
      .filter((frame) => frame.type === "chunk")
      .map((frame) => frame.content)
      .join(""),
  ).toBe("across two instances");
  expect(onB.at(-1)).toMatchObject({ type: "done", runId: started.runId, agentId, status: "completed", output: "across two instances" });

  // And one started over REST on A.
  const invoked = await request(a.origin, `/gateway/v1/agents/${agentId}/invoke`, { method: "POST", token, json: { input: "rest on A" } });
  expect(invoked.status).toBe(200);
  const restFrames = await watcher.run(invoked.body.runId);
  expect(restFrames.at(-1)).toMatchObject({ type: "done", output: "rest on A" });
  // The runner's socket is not subscribed: it saw only its own run.
  expect(runner.frames.some((frame) => frame.runId === invoked.body.runId)).toBe(false);
}, 30_000);
