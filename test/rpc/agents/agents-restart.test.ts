import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";
import { eventually } from "../../helpers/eventually.js";
import { runStarted } from "../../../rpc/agents/state.js";

const G = "/gateway/v1";

/** Creates an agent in a one-slot tenant, deploys and invokes it; returns what to look for after a restart. */
async function seed(server: TestServer) {
  const { token } = await registerUser(server);
  const tenant = (
    await server.request(`${G}/tenants`, {
      method: "POST",
      headers: bearer(token),
      json: { slug: `restart-${Date.now()}`, name: "R", limits: { agents: 1, tokensPerMonth: 100000 } },
    })
  ).body;
  const agent = (
    await server.request(`${G}/agents`, {
      method: "POST",
      headers: bearer(token),
      json: { name: "durable", model: "echo-1", tools: ["calculator"], tenantId: tenant.id },
    })
  ).body;
  await server.request(`${G}/agents/${agent.id}/deploy`, { method: "POST", headers: bearer(token) });
  const run = (
    await server.request(`${G}/agents/${agent.id}/invoke`, { method: "POST", headers: bearer(token), json: { input: "remember me" } })
  ).body;
  expect(run.status).toBe("completed");
  const logs = (await server.request(`${G}/agents/${agent.id}/logs`, { headers: bearer(token) })).body.logs;
  // As shown after the deploy and the run: `updatedAt` follows status changes.
  const shown = (await server.request(`${G}/agents/${agent.id}`, { headers: bearer(token) })).body;
  expect(shown).toEqual({ ...agent, status: "deployed", updatedAt: shown.updatedAt });
  return { token, tenant, agent: shown, logs, tokens: run.usage.total_tokens as number };
}

async function verify(server: TestServer, seeded: Awaited<ReturnType<typeof seed>>) {
  const { token, tenant, agent, logs, tokens } = seeded;
  expect((await server.request(`${G}/agents/${agent.id}`, { headers: bearer(token) })).body).toEqual(agent);
  expect((await server.request(`${G}/agents`, { headers: bearer(token) })).body).toEqual([agent]);
  const after = (await server.request(`${G}/agents/${agent.id}/logs`, { headers: bearer(token) })).body.logs;
  expect(after).toEqual(logs);
  expect(after.map((entry: any) => entry.event)).toEqual(["agent.created", "agent.deploy", "invocation.started", "invocation.finished"]);
  const tenantNow = (await server.request(`${G}/tenants/${tenant.id}`, { headers: bearer(token) })).body;
  expect(tenantNow.usage).toMatchObject({ agents: 1, tokensThisMonth: tokens });
  // The slot is still taken, and the state machine remembers the deploy.
  expect(
    (
      await server.request(`${G}/agents`, {
        method: "POST",
        headers: bearer(token),
        json: { name: "second", model: "echo-1", tenantId: tenant.id },
      })
    ).status,
  ).toBe(403);
  expect((await server.request(`${G}/agents/${agent.id}/deploy`, { method: "POST", headers: bearer(token) })).status).toBe(409);
  // New log lines continue the sequence.
  await server.request(`${G}/agents/${agent.id}/invoke`, { method: "POST", headers: bearer(token), json: { input: "again" } });
  const more = (await server.request(`${G}/agents/${agent.id}/logs?lines=3`, { headers: bearer(token) })).body.logs;
  expect(more.map((entry: any) => entry.seq)).toEqual([logs.at(-1).seq, logs.at(-1).seq + 1, logs.at(-1).seq + 2]);
}

describe("agents survive a restart", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agents-fs-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("with STORAGE=fs", async () => {
    const env = { STORAGE: "fs", DATA_DIR: dir };
    const first = await startTestServer(env);
    const seeded = await seed(first);
    // A run in flight when the process stops dies with it: the next start does not show it running.
    await runStarted(first.composition.ports.repos, seeded.agent.id, "run_inflight", 60_000);
    const running = (await first.request(`${G}/agents/${seeded.agent.id}`, { headers: bearer(seeded.token) })).body;
    expect(running.status).toBe("running");
    // The run's start was a status change; the restart keeps that time while the status reads deployed again.
    seeded.agent = { ...seeded.agent, updatedAt: running.updatedAt };
    await first.close();
    expect((await readdir(dir)).length).toBeGreaterThan(0);
    const second = await startTestServer(env);
    try {
      await verify(second, seeded);
      expect(second.loggedErrors()).toEqual([]);
    } finally {
      await second.close();
    }
  });

  it("with STORAGE=redis", async () => {
    const prefix = uniqueRedisPrefix();
    const env = { STORAGE: "redis", REDIS_PREFIX: prefix };
    try {
      const first = await startTestServer(env);
      const seeded = await seed(first);
      await first.close();
      const second = await startTestServer(env);
      try {
        await verify(second, seeded);
        expect(second.loggedErrors()).toEqual([]);
      } finally {
        await second.close();
      }
    } finally {
      await dropRedisPrefix(prefix);
    }
  });
});

describe("agent runs across instances", () => {
  it("publishes a run's events to watchers on another instance sharing Redis", async () => {
    const prefix = uniqueRedisPrefix();
    const env = { STORAGE: "redis", REDIS_PREFIX: prefix };
    const a = await startTestServer(env);
    const b = await startTestServer(env);
    try {
      const { token } = await registerUser(a);
      const agent = (await a.request(`${G}/agents`, { method: "POST", headers: bearer(token), json: { name: "shared", model: "echo-1" } }))
        .body;
      // The agent and its state are visible from the other instance.
      expect((await b.request(`${G}/agents/${agent.id}`, { headers: bearer(token) })).body.status).toBe("idle");
      const seen: any[] = [];
      const off = await b.composition.ports.store.bus.subscribe(`agent-runs:${agent.id}`, (message) => seen.push(message));
      const run = (
        await a.request(`${G}/agents/${agent.id}/invoke`, { method: "POST", headers: bearer(token), json: { input: "over the wire" } })
      ).body;
      await eventually(() => seen.some((message) => message.event.type === "done"));
      await off();
      expect(seen.every((message) => message.runId === run.runId)).toBe(true);
      expect(seen[0].event).toEqual({ type: "status", status: "running" });
      expect(
        seen
          .filter((message) => message.event.type === "chunk")
          .map((message) => message.event.content)
          .join(""),
      ).toBe("over the wire");
      expect(seen.at(-1).event.result).toMatchObject({ status: "completed", output: "over the wire" });
      expect((await b.request(`${G}/agents/${agent.id}/logs?lines=1`, { headers: bearer(token) })).body.logs[0]).toMatchObject({
        event: "invocation.finished",
        runId: run.runId,
      });
    } finally {
      await a.close();
      await b.close();
      await dropRedisPrefix(prefix);
    }
  });
});
