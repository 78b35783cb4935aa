import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { eventually } from "../../helpers/eventually.js";
import { MICRO, consoleKey, platformAccount, userMessage, type PlatformAccount } from "../../helpers/chat.js";

const G = "/gateway/v1";
const MODELS = {
  models: {
    "echo-a": { provider: "echo", price: { input: 1500, output: 3000 } },
    "echo-b": { provider: "echo", price: { input: 700, output: 900 } },
  },
};

let server: TestServer;
let account: PlatformAccount;

beforeAll(async () => {
  server = await startTestServer({ MODELS_JSON: JSON.stringify(MODELS) });
  account = await platformAccount(server, 50);
}, 30_000);
afterAll(async () => {
  await server?.close();
});

const chat = (key: string, model: string, content: string, stream = false) =>
  server.request("/api/v1/chat/completions", {
    method: "POST",
    headers: bearer(key),
    json: { model, messages: userMessage(content), stream, ...(stream ? { stream_options: { include_usage: true } } : {}) },
  });

describe("usage from the gateway's own metering", () => {
  it("reconciles exactly with the credit ledger across keys, models and streamed requests", async () => {
    const second = await consoleKey(server, account);
    const before = await server.composition.ports.repos.credits.balance(account.workspaceId);
    const keys = [account.key, second.key];
    const sent: { key: string; model: string }[] = [];
    for (let i = 0; i < 8; i += 1) {
      const key = keys[i % 2]!;
      const model = i % 3 === 0 ? "echo-b" : "echo-a";
      const res = await chat(key, model, `message number ${i} ${"word ".repeat(i * 7)}`, i % 4 === 3);
      expect(res.status).toBe(200);
      sent.push({ key, model });
    }
    const after = await server.composition.ports.repos.credits.balance(account.workspaceId);
    const spent = before - after;
    expect(spent).toBeGreaterThan(0);

    const token = account.user.token;
    const summary = await server.request(`${G}/billing/usage`, { headers: bearer(token) });
    expect(summary.status).toBe(200);
    expect(summary.body.totals.credits).toBe(spent);
    expect(summary.body.totals.requests).toBe(8);
    const ws = summary.body.workspaces.find((w: any) => w.workspaceId === account.workspaceId);
    expect(ws.credits).toBe(spent);
    expect(ws.creditBalance).toBe(after);

    const models = await server.request(`${G}/usage/models`, { headers: bearer(token) });
    expect(models.body.rows.map((r: any) => [r.model, r.requests])).toEqual([
      ["echo-a", sent.filter((s) => s.model === "echo-a").length],
      ["echo-b", sent.filter((s) => s.model === "echo-b").length],
    ]);
    expect(models.body.rows.reduce((sum: number, r: any) => sum + r.credits, 0)).toBe(spent);
    const keyRows = await server.request(`${G}/usage/keys`, { headers: bearer(token) });
    expect(keyRows.body.rows).toHaveLength(2);
    expect(keyRows.body.rows.reduce((sum: number, r: any) => sum + r.credits, 0)).toBe(spent);
    expect(keyRows.body.rows.map((r: any) => r.requests)).toEqual([4, 4]);
    const daily = await server.request(`${G}/usage/daily`, { headers: bearer(token) });
    expect(daily.body.rows).toHaveLength(1);
    expect(daily.body.rows[0].credits).toBe(spent);
    expect(daily.body.rows[0].inputTokens + daily.body.rows[0].outputTokens).toBeGreaterThan(0);
  });

  it("counts agent runs and their model turns per agent", async () => {
    const user = await registerUser(server);
    const agent = await server.request(`${G}/agents`, {
      method: "POST",
      headers: bearer(user.token),
      json: { name: "metered", model: "echo-a" },
    });
    for (let i = 0; i < 2; i += 1)
      expect(
        (
          await server.request(`${G}/agents/${agent.body.id}/invoke`, {
            method: "POST",
            headers: bearer(user.token),
            json: { input: "hi" },
          })
        ).status,
      ).toBe(200);
    const agents = await server.request(`${G}/usage/agents`, { headers: bearer(user.token) });
    expect(agents.body.rows).toHaveLength(1);
    expect(agents.body.rows[0]).toMatchObject({ agentId: agent.body.id, agentRuns: 2 });
    expect(agents.body.rows[0].requests).toBeGreaterThanOrEqual(2);
    // The tenant's month (the ledger the turns draw on) and the metering agree once both runs settled.
    await eventually(async () => {
      const [tenant, rows] = await Promise.all([
        server.request(`${G}/tenants/${user.user.tenantId}`, { headers: bearer(user.token) }),
        server.request(`${G}/usage/agents`, { headers: bearer(user.token) }),
      ]);
      return rows.body.rows[0].inputTokens + rows.body.rows[0].outputTokens === tenant.body.usage.tokensThisMonth;
    });
  });

  it("answers unknown reports with 404, '..' with 400, and another tenant with 404", async () => {
    const token = account.user.token;
    const unknown = await server.request(`${G}/usage/monthly`, { headers: bearer(token) });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toContain("known: daily, models, keys, agents");
    const dots = await server.request(`${G}/usage/daily%2F..%2Fkeys`, { headers: bearer(token) });
    expect(dots.status).toBe(400);
    const other = await registerUser(server);
    expect((await server.request(`${G}/usage/daily?tenantId=${account.user.user.tenantId}`, { headers: bearer(other.token) })).status).toBe(
      404,
    );
    const badDay = await server.request(`${G}/billing/usage?from=yesterday`, { headers: bearer(token) });
    expect(badDay.status).toBe(400);
    expect(MICRO).toBe(1_000_000);
  });
});
