import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer } from "../../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";

/** A plan and its execution results, once acknowledged, are still there after a restart. */
async function roundTrip(env: Record<string, string>) {
  const first = await startTestServer({ ...env, MODELS_JSON: JSON.stringify({ models: {} }) });
  let token: string;
  let planId: string;
  try {
    token = (await registerUser(first)).token;
    const plan = await first.request("/gateway/v1/mcp/plan", {
      method: "POST",
      headers: bearer(token),
      json: { input: "compute 6 * 7 then compute 1 + 1" },
    });
    expect(plan.status).toBe(201);
    planId = plan.body.id;
    const run = await first.request("/gateway/v1/mcp/execute", { method: "POST", headers: bearer(token), json: { planId } });
    expect(run.body.status).toBe("completed");
    expect(first.loggedErrors()).toEqual([]);
  } finally {
    await first.close();
  }
  const second = await startTestServer({ ...env, MODELS_JSON: JSON.stringify({ models: {} }) });
  try {
    const list = await second.request("/gateway/v1/mcp/plans", { headers: bearer(token) });
    expect(list.body.plans.map((plan: any) => plan.id)).toEqual([planId]);
    const stored = list.body.plans[0];
    expect(stored).toMatchObject({ status: "completed", planner: { kind: "ranking" } });
    expect(stored.steps.map((step: any) => [step.tool, step.args, step.result.structuredContent.result])).toEqual([
      ["calculator", { expression: "6 * 7" }, 42],
      ["calculator", { expression: "1 + 1" }, 2],
    ]);
    expect(second.loggedErrors()).toEqual([]);
  } finally {
    await second.close();
  }
}

describe("tool plans survive a restart", () => {
  it("with STORAGE=fs", async () => {
    const dir = await mkdtemp(join(tmpdir(), "routing-fs-"));
    try {
      await roundTrip({ STORAGE: "fs", DATA_DIR: dir });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("with STORAGE=redis", async () => {
    const prefix = uniqueRedisPrefix();
    try {
      await roundTrip({ STORAGE: "redis", REDIS_PREFIX: prefix });
    } finally {
      await dropRedisPrefix(prefix);
    }
  });
});
