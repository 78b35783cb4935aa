import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";

/**
 * docs/interface.md 5 (gateway keys): `expiresAt` on `POST /auth/keys` is honoured — the key
 * works until then and is 401 from then on — and a date in the past, past ten years or not a
 * timestamp is a 400 naming it. The clock is moved with fake timers (Date only).
 */

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startTestServer();
  token = (await registerUser(server)).token;
});

afterEach(() => {
  vi.useRealTimers();
});

afterAll(async () => {
  await server.close();
});

const create = (json: Record<string, unknown>) => server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(token), json });

describe("gateway keys with expiresAt", () => {
  it("work until expiresAt and are refused with 401 from then on", async () => {
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const created = await create({ name: "short-lived", expiresAt });
    expect(created.status).toBe(201);
    expect(created.body.expiresAt).toBe(expiresAt);
    const listed = await server.request("/gateway/v1/auth/keys", { headers: bearer(token) });
    expect(listed.body.find((key: { id: string }) => key.id === created.body.id).expiresAt).toBe(expiresAt);
    expect((await server.request("/gateway/v1/auth/me", { headers: bearer(created.body.key) })).status).toBe(200);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.parse(expiresAt) + 1_000);
    const refused = await server.request("/gateway/v1/auth/me", { headers: bearer(created.body.key) });
    expect(refused.status).toBe(401);
  });

  it.each([
    ["in the past", new Date(Date.now() - 60_000).toISOString(), "in the future"],
    ["past ten years", new Date(Date.now() + 11 * 366 * 86_400_000).toISOString(), "within ten years"],
    ["not a timestamp", "next tuesday", "ISO 8601"],
  ])("an expiresAt %s is 400 naming it", async (_case, expiresAt, message) => {
    const res = await create({ name: "bad", expiresAt });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain(message);
  });
});
