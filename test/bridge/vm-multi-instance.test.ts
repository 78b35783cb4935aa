import { afterAll, beforeAll, expect, it } from "vitest";
import { TEST_JWT_SECRET, TEST_DATA_SECRET, newUserBody } from "../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { startInstance, instanceRequest, type Instance } from "../helpers/instances.js";
import { connectVm, vmSocketUrl } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";

const prefix = uniqueRedisPrefix();
let a: Instance;
let b: Instance;

const request = instanceRequest;

beforeAll(async () => {
  const env = {
    STORAGE: "redis",
    REDIS_PREFIX: prefix,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    LOG_LEVEL: "error",
    VM_HEARTBEAT_SECONDS: "5",
  };
  [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
}, 60_000);
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  expect(a.process.exitCode ?? a.process.signalCode).not.toBeNull();
  expect(b.process.exitCode ?? b.process.signalCode).not.toBeNull();
  await dropRedisPrefix(prefix);
});

it("runs a tool on a VM connected to instance A through /bridge/tools/execute on instance B", async () => {
  const registered = await request(a.origin, "/gateway/v1/auth/register", { method: "POST", json: newUserBody() });
  const token = registered.body.token as string;
  let hang = false;
  const vm = await connectVm(vmSocketUrl(a.origin, "agent", { vmId: "shared-vm" }), token, {
    "tools/call": async ({ name, arguments: args }) => {
      if (hang) return new Promise(() => undefined);
      if (name === "fail") throw new Error("VM says no");
      return { content: [{ type: "text", text: `${name}(${JSON.stringify(args)}) on A` }] };
    },
  });
  await vm.register([{ name: "echo" }, { name: "fail" }]);
  const execute = (body: Record<string, unknown>) =>
    request(b.origin, "/bridge/tools/execute", { method: "POST", token, json: { vm_id: "shared-vm", input: {}, ...body } });

  const ok = await eventually(async () => {
    const res = await execute({ tool_name: "echo", input: { x: 1 } });
    return res.status === 200 ? res : undefined;
  });
  expect(ok?.body).toEqual({ content: [{ type: "text", text: 'echo({"x":1}) on A' }] });

  // Many calls from B are multiplexed over A's one socket.
  const many = await Promise.all(Array.from({ length: 10 }, (_, i) => execute({ tool_name: "echo", input: { i } })));
  expect(many.map((res) => res.body.content[0].text)).toEqual(Array.from({ length: 10 }, (_, i) => `echo({"i":${i}}) on A`));

  // A VM error crosses instances with its status and message; an unknown tool is a 404 from B's registry view.
  const failed = await execute({ tool_name: "fail" });
  expect(failed.status).toBe(502);
  expect(failed.body.error.message).toContain("VM says no");
  expect((await execute({ tool_name: "nope" })).status).toBe(404);

  // A VM that drops mid-call fails B's forwarded call at once, not at its timeout.
  hang = true;
  const started = Date.now();
  const pending = execute({ tool_name: "echo", timeout: 30 });
  await eventually(() => vm.frames.filter((f) => JSON.parse(f).method === "tools/call").length === 13);
  vm.ws.terminate();
  const dropped = await pending;
  expect(dropped.status).toBe(502);
  expect(dropped.body.error.details.reason).toBe("vm_disconnected");
  expect(Date.now() - started).toBeLessThan(10_000);

  // Once A has announced the VM left, B answers the documented 503.
  await eventually(async () => (await execute({ tool_name: "echo" })).status === 503);
});
