import { afterAll, afterEach, beforeAll, expect, it, vi } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * Issue 9 item 12: an agent's `updatedAt` (docs/interface.md 2.6) moves on every status change — deploy,
 * pause, resume, and an invocation starting and ending — not only on PUT. The clock is faked
 * (Date only, so sockets and timers run) to step it between changes.
 */

const G = "/gateway/v1";
let server: TestServer;
let headers: Record<string, string>;

beforeAll(async () => {
  server = await startTestServer();
  // A gateway key, not a session token: sessions expire long before the faked 2030 clock.
  const key = await server.request(`${G}/auth/keys`, {
    method: "POST",
    headers: bearer((await registerUser(server)).token),
    json: { name: "clock" },
  });
  headers = bearer(key.body.key);
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

it("changes updatedAt on every status change", async () => {
  vi.useFakeTimers({ toFake: ["Date"], now: new Date("2030-01-01T00:00:00.000Z") });
  const created = await server.request(`${G}/agents`, { method: "POST", headers, json: { name: "clock", model: "echo-1", tools: [] } });
  expect(created.body.updatedAt).toBe("2030-01-01T00:00:00.000");
  const id = created.body.id as string;
  const read = async () => (await server.request(`${G}/agents/${id}`, { headers })).body as { status: string; updatedAt: string };

  const steps: [string, string][] = [
    ["deploy", "deployed"],
    ["pause", "paused"],
    ["resume", "deployed"],
  ];
  let minute = 0;
  for (const [action, status] of steps) {
    minute += 1;
    vi.setSystemTime(new Date(`2030-01-01T00:0${minute}:00.000Z`));
    const res = await server.request(`${G}/agents/${id}/${action}`, { method: "POST", headers });
    expect(res.status, action).toBe(200);
    const agent = await read();
    expect(agent.status).toBe(status);
    expect(agent.updatedAt, action).toBe(`2030-01-01T00:0${minute}:00.000`);
  }

  vi.setSystemTime(new Date("2030-01-01T00:05:00.000Z"));
  const invoked = await server.request(`${G}/agents/${id}/invoke`, { method: "POST", headers, json: { input: "hello" } });
  expect(invoked.status).toBe(200);
  // The run started and ended (running → deployed) at this time; both are status changes.
  const after = await read();
  expect(after.status).toBe("deployed");
  expect(after.updatedAt > "2030-01-01T00:04:00.000").toBe(true);
  expect(after.updatedAt.startsWith("2030-01-01T00:05:00.00")).toBe(true);

  // Two changes within one millisecond still give two different values.
  const before = after.updatedAt;
  await server.request(`${G}/agents/${id}/pause`, { method: "POST", headers });
  expect((await read()).updatedAt > before).toBe(true);
});
