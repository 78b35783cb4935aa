import { afterAll, beforeAll, expect, it } from "vitest";
import { TEST_JWT_SECRET, TEST_DATA_SECRET, newUserBody } from "../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { instanceRequest, startInstance, type Instance } from "../helpers/instances.js";
import { startReceiver } from "../helpers/webhook-receiver.js";
import { startHeldUpstream, type HeldUpstream } from "../helpers/held-stream.js";
import { eventually } from "../helpers/eventually.js";

/**
 * Leases for what a process holds (docs/storage.md "Leases"): instances on one Redis killed
 * with SIGKILL (nothing released, nothing said) in the middle of a webhook attempt and of an
 * agent run; another instance takes the attempt over, and stops showing the agent running,
 * within the lease (2 s here). A stream's place: test/rpc/chat/stream-quota-instances.test.ts;
 * a credit hold: test/storage/crash-consistency.test.ts.
 */
const prefix = uniqueRedisPrefix();
const LEASE_SECONDS = 2;
let upstream: HeldUpstream;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
const instances: Instance[] = [];
const env = () => ({
  STORAGE: "redis",
  REDIS_PREFIX: prefix,
  GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
  DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
  LOG_LEVEL: "error",
  WEBHOOKS_ALLOW_PRIVATE: "true",
  WEBHOOKS_POLL_MS: "100",
  WEBHOOKS_LEASE_SECONDS: String(LEASE_SECONDS),
  AGENT_RUN_LEASE_SECONDS: String(LEASE_SECONDS),
  MODELS_JSON: JSON.stringify({ models: { held: { provider: "openai-compatible", baseURL: upstream.url } } }),
});
async function instance(): Promise<Instance> {
  const started = await startInstance(env());
  instances.push(started);
  return started;
}

/** The instance that outlives the first test's kill, watching the second's. */
let survivor: Instance;

beforeAll(async () => {
  upstream = await startHeldUpstream();
  receiver = await startReceiver();
});
afterAll(async () => {
  upstream.finish();
  await Promise.all(instances.map((one) => one.stop()));
  await upstream.close();
  await receiver.close();
  await dropRedisPrefix(prefix);
});

it("a webhook attempt whose instance was killed mid-attempt is made by another within the lease", async () => {
  const a = await instance();
  const { token } = (await instanceRequest(a.origin, "/gateway/v1/auth/register", { method: "POST", json: newUserBody() })).body;
  const sub = (
    await instanceRequest(a.origin, "/gateway/v1/webhooks/subscriptions", {
      method: "POST",
      token,
      json: { url: `http://127.0.0.1:${receiver.port}/killed`, filter: ["kill.*"] },
    })
  ).body;
  receiver.secrets.push(sub.secret);
  // A's attempt reaches the receiver, which holds it: A holds the claim, renewing it.
  receiver.answers.push("hang");
  await instanceRequest(a.origin, "/gateway/v1/events", { method: "POST", token, json: { topic: "kill", type: "kill.now", payload: {} } });
  await eventually(() => receiver.received.some((r) => r.path === "/killed"), 10_000);
  const b = await instance();
  survivor = b;
  expect(receiver.received.filter((r) => r.path === "/killed")).toHaveLength(1);
  a.process.kill("SIGKILL");
  const killedAt = Date.now();
  await eventually(() => receiver.received.filter((r) => r.path === "/killed").length === 2, 15_000);
  const tookOver = Date.now() - killedAt;
  const deliveries = (await instanceRequest(b.origin, `/gateway/v1/webhooks/deliveries?subscriptionId=${sub.id}`, { token })).body.data;
  expect(deliveries).toHaveLength(1);
  await eventually(async () => {
    const [delivery] = (await instanceRequest(b.origin, `/gateway/v1/webhooks/deliveries?subscriptionId=${sub.id}`, { token })).body.data;
    return delivery.status === "succeeded" && delivery.attemptCount === 1;
  });
  expect(receiver.received.filter((r) => r.path === "/killed").every((r) => r.error === undefined)).toBe(true);
  // Within the lease plus a poll or two (and this machine's slack).
  expect(tookOver).toBeLessThan(LEASE_SECONDS * 1000 + 5_000);
  console.log(`webhook attempt taken over ${tookOver} ms after kill -9 (lease ${LEASE_SECONDS} s)`);
}, 90_000);

it("an agent whose run was on an instance killed mid-run stops being running within the lease, and can be deleted", async () => {
  const a = await instance();
  const b = survivor ?? (await instance());
  const { token } = (await instanceRequest(b.origin, "/gateway/v1/auth/register", { method: "POST", json: newUserBody() })).body;
  const agent = (
    await instanceRequest(b.origin, "/gateway/v1/agents", {
      method: "POST",
      token,
      json: { name: "doomed", model: "held", description: "" },
    })
  ).body;
  const status = async () => (await instanceRequest(b.origin, `/gateway/v1/agents/${agent.id}`, { token })).body.status;
  // The run's model call is held by the upstream: the run stays in flight on A.
  const run = instanceRequest(a.origin, `/gateway/v1/agents/${agent.id}/invoke`, { method: "POST", token, json: { input: "hold" } }).catch(
    () => undefined,
  );
  await eventually(async () => (await status()) === "running", 10_000);
  expect((await instanceRequest(b.origin, `/gateway/v1/agents/${agent.id}`, { method: "DELETE", token })).status).toBe(409);
  // Past a renewal (every third of the lease) it is still running.
  await new Promise((resolve) => setTimeout(resolve, LEASE_SECONDS * 1000));
  expect(await status()).toBe("running");
  a.process.kill("SIGKILL");
  const killedAt = Date.now();
  await run;
  await eventually(async () => (await status()) !== "running", 15_000);
  const freed = Date.now() - killedAt;
  expect(freed).toBeLessThan(LEASE_SECONDS * 1000 + 3_000);
  expect((await instanceRequest(b.origin, `/gateway/v1/agents/${agent.id}`, { method: "DELETE", token })).status).toBe(200);
  console.log(`agent run released ${freed} ms after kill -9 (lease ${LEASE_SECONDS} s)`);
}, 90_000);
