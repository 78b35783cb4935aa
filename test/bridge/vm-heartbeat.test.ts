import { afterEach, expect, it, vi } from "vitest";
import { registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { connectVm, openSocket, vmSocketUrl } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";

let server: TestServer | undefined;
afterEach(async () => {
  vi.useRealTimers();
  await server?.close();
});

it("drops a VM that stops answering heartbeats and keeps one that answers", async () => {
  // Only the heartbeat interval is faked: sockets and polling keep real time.
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
  server = await startTestServer({ VM_HEARTBEAT_SECONDS: "5" });
  const { token } = await registerUser(server);
  const live = await connectVm(vmSocketUrl(server.origin, "a", { vmId: "live" }), token);
  // A VM whose process hangs: the socket stays open, nothing is ever answered.
  const dead = await openSocket(vmSocketUrl(server.origin, "a", { vmId: "dead" }), { headers: { authorization: `Bearer ${token}` } });
  const deadPings: unknown[] = [];
  dead.on("message", (data) => deadPings.push(JSON.parse(data.toString())));
  const deadClosed = new Promise<number>((resolve) => dead.once("close", (code) => resolve(code)));
  await eventually(() => server!.bridge.vms.stats().connected === 2);

  vi.advanceTimersByTime(5000);
  await eventually(() => deadPings.length === 1 && live.frames.some((f) => JSON.parse(f).method === "ping"));
  expect(deadPings[0]).toMatchObject({ jsonrpc: "2.0", method: "ping" });
  await eventually(() => server!.bridge.vms.stats().inFlight === 1); // the live VM's pong arrived; the dead one's ping waits

  vi.advanceTimersByTime(5000);
  expect(await deadClosed).toBe(1006);
  expect(server.bridge.vms.local("dead")).toBeUndefined();
  expect(server.bridge.vms.local("live")).toBeDefined();
  expect(server.logs().some((line) => line.event === "vm.heartbeat_missed" && line.vmId === "dead")).toBe(true);
  await live.close();
  await eventually(() => server!.bridge.vms.stats().connected === 0 && server!.bridge.vms.stats().inFlight === 0);
});
