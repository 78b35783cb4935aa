import { afterAll, beforeAll, expect, it } from "vitest";
import { TEST_JWT_SECRET, TEST_DATA_SECRET, newUserBody } from "../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { startInstance, instanceRequest, type Instance } from "../helpers/instances.js";
import { connectVm, openSocket, vmSocketUrl, type TestVm } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";

/**
 * QUOTA_VM_SOCKETS_PER_TENANT and QUOTA_VM_TOOLS_PER_TENANT across two instances on one Redis
 * (docs/quotas.md): sockets and tools on either instance count against one quota, and the
 * places of an instance that dies (SIGKILL: nothing released) end with their lease, three
 * heartbeats (VM_HEARTBEAT_SECONDS=1).
 */
const prefix = uniqueRedisPrefix();
let a: Instance;
let b: Instance;
const vms: TestVm[] = [];

beforeAll(async () => {
  const env = {
    STORAGE: "redis",
    REDIS_PREFIX: prefix,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    LOG_LEVEL: "error",
    VM_HEARTBEAT_SECONDS: "1",
    GATEWAY_RATE_LIMIT_RPM: "100000",
    QUOTA_VM_SOCKETS_PER_TENANT: "2",
    QUOTA_VM_TOOLS_PER_TENANT: "4",
  };
  [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
}, 60_000);
afterAll(async () => {
  for (const vm of vms) vm.ws.terminate();
  await Promise.all([a?.stop(), b?.stop()]);
  await dropRedisPrefix(prefix);
});

async function connect(origin: string, vmId: string, token: string): Promise<TestVm> {
  const vm = await connectVm(vmSocketUrl(origin, "agent", { vmId }), token);
  vms.push(vm);
  return vm;
}

const refusal = (origin: string, vmId: string, token: string) =>
  openSocket(vmSocketUrl(origin, "agent", { vmId }), { headers: { authorization: `Bearer ${token}` } }).then(
    (ws) => (ws.close(), undefined),
    (error: { status: number; body: string }) => ({ status: error.status, body: JSON.parse(error.body) }),
  );

const tools = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ name: `${prefix}${i}` }));

it("counts a tenant's sockets and tools on both instances, and frees the places of an instance killed with them", async () => {
  const alice = (await instanceRequest(a.origin, "/gateway/v1/auth/register", { method: "POST", json: newUserBody() })).body;
  const bob = (await instanceRequest(b.origin, "/gateway/v1/auth/register", { method: "POST", json: newUserBody() })).body;

  const onA = await connect(a.origin, "alice-a", alice.token);
  const onB = await connect(b.origin, "alice-b", alice.token);
  // The third socket is refused on either instance.
  for (const origin of [a.origin, b.origin]) {
    expect(await refusal(origin, "alice-c", alice.token)).toMatchObject({
      status: 409,
      body: {
        error: {
          code: "CONFLICT",
          details: { quota: "vm_sockets_per_tenant", limit: 2, count: 2 },
        },
      },
    });
  }
  // Bob's tenant is not affected, on either instance.
  await connect(a.origin, "bob-a", bob.token);
  await connect(b.origin, "bob-b", bob.token);

  // Tools: three on A, then B's VM may announce one more, not two.
  expect(await onA.register(tools("a", 3))).toMatchObject({ tools: ["a0", "a1", "a2"] });
  const tooMany = await onB.rpc.requestAdvanced({ jsonrpc: "2.0", id: 9, method: "tools/register", params: { tools: tools("b", 2) } });
  expect(tooMany.error).toMatchObject({ code: -32009, data: { quota: "vm_tools_per_tenant", limit: 4, count: 3, requested: 2 } });
  expect(await onB.register(tools("b", 1))).toMatchObject({ tools: ["b0"] });

  // A dies without a word: its places are still leased, so B refuses at once...
  a.process.kill("SIGKILL");
  const killedAt = Date.now();
  expect((await refusal(b.origin, "alice-c", alice.token))?.status).toBe(409);
  // ...and admits once the lease (three heartbeats) has run out.
  const third = (await eventually(
    () => connectVm(vmSocketUrl(b.origin, "agent", { vmId: "alice-c" }), alice.token).catch(() => undefined),
    15_000,
  ))!;
  vms.push(third);
  expect(Date.now() - killedAt).toBeGreaterThanOrEqual(1_500);
  // The dead VM's tools are no longer counted either (their lease ends with the socket's, give or take a renewal).
  const announced = await eventually(
    async () =>
      (await third.rpc.requestAdvanced({ jsonrpc: "2.0", id: 10, method: "tools/register", params: { tools: tools("c", 3) } })).result,
    5_000,
  );
  expect(announced).toEqual({ tools: ["c0", "c1", "c2"] });
}, 60_000);
