import { afterAll, beforeAll, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { TEST_JWT_SECRET, TEST_DATA_SECRET, newUserBody } from "../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../helpers/redis.js";
import { startInstance, type Instance } from "../helpers/instances.js";
import { connectVm, vmSocketUrl, type TestVm } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";

const prefix = uniqueRedisPrefix();
let a: Instance;
let b: Instance;
let client: Client | undefined;
let vm: TestVm | undefined;

beforeAll(async () => {
  const env = {
    STORAGE: "redis",
    REDIS_PREFIX: prefix,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET,
    LOG_LEVEL: "error",
    GATEWAY_RATE_LIMIT_RPM: "10000",
  };
  [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
}, 60_000);
afterAll(async () => {
  await client?.close().catch(() => undefined);
  await vm?.close();
  await Promise.all([a?.stop(), b?.stop()]);
  await dropRedisPrefix(prefix);
});

it("an MCP session on instance B hears about a VM connecting to A, and calls its tool through A", async () => {
  const registered = await fetch(`${a.origin}/gateway/v1/auth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(newUserBody()),
  });
  const { token } = (await registered.json()) as { token: string };

  client = new Client({ name: "multi", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${b.origin}/bridge/mcp/`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  let changes = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    changes += 1;
  });
  // A change before the client's GET stream is held is delivered once it opens (bridge/mcp/sessions.ts).
  expect((await client.listTools()).tools.some((tool) => tool.name.startsWith("vm__"))).toBe(false);

  vm = await connectVm(vmSocketUrl(a.origin, "agent", { vmId: "vm-on-a" }), token, {
    "tools/call": ({ name, arguments: args }) => ({ content: [{ type: "text", text: `${name}(${args.x}) ran on A` }] }),
  });
  await vm.register([{ name: "work", inputSchema: { type: "object", properties: { x: { type: "number" } }, required: ["x"] } }]);

  // B learns of the change over Redis and notifies its session.
  await eventually(() => changes > 0, 10_000);
  const names = (await client.listTools()).tools.map((tool) => tool.name);
  expect(names).toContain("vm__vm-on-a__work");

  const result = (await client.callTool({ name: "vm__vm-on-a__work", arguments: { x: 7 } })) as CallToolResult;
  expect(result.isError).toBeFalsy();
  expect(result.content).toEqual([{ type: "text", text: "work(7) ran on A" }]);
  const calls = vm.frames.map((frame) => JSON.parse(frame)).filter((message) => message.method === "tools/call");
  expect(calls).toHaveLength(1);

  // The VM leaving A is a change on B too.
  const before = changes;
  await vm.close();
  await eventually(() => changes > before, 10_000);
  await eventually(async () => !(await client!.listTools()).tools.some((tool) => tool.name === "vm__vm-on-a__work"));
  const gone = await client.callTool({ name: "vm__vm-on-a__work", arguments: { x: 1 } }).catch((error: Error) => error);
  expect(gone).toBeInstanceOf(Error);
  expect((gone as Error).message).toContain("Unknown tool");
});

it("a client on instance B that cancels its call of a VM held by A gets the VM told (notifications/cancelled for its request)", async () => {
  const registered = await fetch(`${a.origin}/gateway/v1/auth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(newUserBody()),
  });
  const { token } = (await registered.json()) as { token: string };
  const canceller = new Client({ name: "multi-cancel", version: "1.0.0" });
  await canceller.connect(
    new StreamableHTTPClientTransport(new URL(`${b.origin}/bridge/mcp/`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  const slow = await connectVm(vmSocketUrl(a.origin, "agent", { vmId: "slow-on-a" }), token, {
    "tools/call": () => new Promise(() => undefined),
  });
  try {
    await slow.register([{ name: "wait" }]);
    await eventually(async () => (await canceller.listTools()).tools.some((tool) => tool.name === "vm__slow-on-a__wait"), 10_000);
    const controller = new AbortController();
    const pending = canceller.callTool({ name: "vm__slow-on-a__wait", arguments: {} }, undefined, { signal: controller.signal });
    const messages = () =>
      slow.frames.map((frame) => JSON.parse(frame) as { id?: number; method?: string; params?: { requestId?: number } });
    await eventually(() => messages().some((message) => message.method === "tools/call"), 10_000);
    controller.abort("no longer needed");
    await expect(pending).rejects.toThrow();
    const call = messages().find((message) => message.method === "tools/call")!;
    await eventually(
      () => messages().some((message) => message.method === "notifications/cancelled" && message.params?.requestId === call.id),
      10_000,
    );
  } finally {
    await canceller.close().catch(() => undefined);
    await slow.close();
  }
});
