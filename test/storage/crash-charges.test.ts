import { createServer, type Server } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import OpenAI from "openai";
import { instanceRequest, startInstance } from "../helpers/instances.js";
import { newUserBody, TEST_JWT_SECRET } from "../helpers/server.js";
import { consoleCookieFrom } from "../helpers/console.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";
import { openStore, type StoreOptions } from "../../storage/store.js";
import { LedgerRepo } from "../../storage/repos/ledger.js";
import { UsageRepo } from "../../storage/repos/usage.js";
import { CreditsRepo } from "../../storage/repos/credits.js";

/**
 * docs/crash-consistency.md "No charge without an answer": a server process is killed with
 * SIGKILL while dozens of paid chats are being answered (the provider answers every request at
 * once), several times, on fs and on Redis. After each kill the credits charged are compared
 * with the answers the clients received in full. Before, a chat was settled before its answer
 * was written: over 4 runs of 300 concurrent chats on fs, charged minus answered was +4, 0,
 * +56, +4 (Redis +1) — clients were charged for answers they never got.
 *
 * Half the loops chat on the Gateway API with a gateway key of the same user, on the user's
 * plan allowance: its usage obeys the same rule as the credits, and each settlement (credits or
 * plan usage, with the request's metering counters) lands in one durable step (fs: one journal
 * record), so after every kill the usage report counts exactly the requests the ledger charged.
 */
const G = "/gateway/v1";
const PRICE = { input: 1000, output: 2000 };
const CONCURRENCY = 300;
const KILLS = 3;
let provider: Server;
let providerUrl: string;
const dirs: string[] = [];
const prefixes: string[] = [];

beforeAll(async () => {
  provider = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: "chatcmpl-1",
          object: "chat.completion",
          created: 0,
          model: "paid",
          choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
          usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
  providerUrl = `http://127.0.0.1:${(provider.address() as { port: number }).port}/v1`;
});
afterAll(async () => {
  provider.closeAllConnections();
  await new Promise((resolve) => provider.close(resolve));
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

async function platformKey(origin: string, email: string, password: string): Promise<string> {
  const session = await fetch(`${origin}/api/session`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email, password }),
  });
  const cookie = consoleCookieFrom(session.headers)!;
  const created = await fetch(`${origin}/api/api-keys`, {
    method: "POST",
    headers: { "content-type": "application/json", cookie: cookie.pair },
    body: JSON.stringify({ name: "crash" }),
  });
  return ((await created.json()) as { key: string }).key;
}

interface Round {
  answered: number;
  charged: number;
  /** Gateway chats answered, and charged to the plan's usage (in requests). */
  planAnswered: number;
  planCharged: number;
  /** Requests the usage report counts in the round, Platform and Gateway. */
  meteredPlatform: number;
  meteredGateway: number;
}

const PLAN_WINDOW_SECONDS = 86_400;
/** A plan no test reaches: the Gateway chats here are about durability, not the allowance. */
const PLANS = JSON.stringify({ free: { name: "Free", tokensPerWindow: 1_000_000_000, windowSeconds: PLAN_WINDOW_SECONDS } });

/**
 * Runs KILLS rounds: start, paid chats from CONCURRENCY loops, SIGKILL once `killAfter(i)`
 * answers arrived, then (next start) the credits charged in the round.
 */
async function killRounds(env: Record<string, string>, storeOptions: StoreOptions): Promise<Round[]> {
  let instance = await startInstance(env);
  const ownerBody = newUserBody();
  const registered = await instanceRequest(instance.origin, `${G}/auth/register`, { method: "POST", json: ownerBody });
  const workspaceId = registered.body.user.workspaceId as string;
  const userId = registered.body.user.id as string;
  const tenantId = registered.body.user.tenantId as string;
  const key = await platformKey(instance.origin, ownerBody.email, ownerBody.password);
  const gatewayKey = (
    await instanceRequest(instance.origin, `${G}/auth/keys`, { method: "POST", token: registered.body.token, json: { name: "crash" } })
  ).body.key as string;
  const granted = 1_000_000_000;
  const side = async () => openStore(storeOptions, { whenOwned: "connect" });
  let store = await side();
  await new CreditsRepo(store).grant(workspaceId, granted);
  const ledger = () => new LedgerRepo(store);
  const credits = ledger().credits(workspaceId);
  const plan = ledger().planTokens(userId, PLAN_WINDOW_SECONDS * 1000);
  const request = (origin: string, surface: "platform" | "gateway" = "platform") =>
    new OpenAI({
      baseURL: `${origin}${surface === "platform" ? "/api/v1" : G}`,
      apiKey: surface === "platform" ? key : gatewayKey,
      maxRetries: 0,
    }).chat.completions.create({
      model: "paid",
      messages: [{ role: "user", content: "x" }],
      max_tokens: 5,
    });
  /** Requests the usage report counts per surface (all days: the rounds may cross midnight). */
  const metered = async () => {
    const rows = await new UsageRepo(store).rows(tenantId, "0000-00-00", "9999-99-99");
    const count = (surface: string) => rows.filter((row) => row.surface === surface).reduce((sum, row) => sum + row.requests, 0);
    return { platform: count("platform"), gateway: count("gateway") };
  };
  await request(instance.origin);
  await request(instance.origin, "gateway");
  await vi.waitFor(async () => expect((await ledger().state(credits)).value).toBeLessThan(granted), { timeout: 10_000, interval: 10 });
  await vi.waitFor(async () => expect((await ledger().state(plan)).value).toBeGreaterThan(0), { timeout: 10_000, interval: 10 });
  // The first request of a rollup in a process writes its record after the settlement: wait for it.
  await vi.waitFor(async () => expect(await metered()).toEqual({ platform: 1, gateway: 1 }), { timeout: 10_000, interval: 10 });
  const perRequest = granted - (await ledger().state(credits)).value;
  const perPlanRequest = (await ledger().state(plan)).value;
  let before = (await ledger().state(credits)).value;
  let planBefore = perPlanRequest;
  let meteredBefore = await metered();
  await store.close();
  const rounds: Round[] = [];
  for (let round = 0; round < KILLS; round += 1) {
    let answered = 0;
    let planAnswered = 0;
    let stopped = false;
    const origin = instance.origin;
    const loops = Array.from({ length: CONCURRENCY }, async (_, i) => {
      const surface = i % 2 ? "gateway" : "platform";
      while (!stopped) {
        try {
          await request(origin, surface);
          if (surface === "gateway") planAnswered += 1;
          else answered += 1;
        } catch {
          return;
        }
      }
    });
    // Killed at a different point each round, with answers streaming out all the while.
    const killAt = 400 + 150 * round;
    await vi.waitFor(() => expect(answered + planAnswered).toBeGreaterThanOrEqual(killAt), { timeout: 120_000, interval: 1 });
    instance.process.kill("SIGKILL");
    stopped = true;
    await Promise.all(loops);
    instance = await startInstance(env);
    store = await side();
    const after = (await ledger().state(credits)).value;
    const planAfter = (await ledger().state(plan)).value;
    const meteredAfter = await metered();
    await store.close();
    const charged = (before - after) / perRequest;
    rounds.push({
      answered,
      charged,
      planAnswered,
      planCharged: (planAfter - planBefore) / perPlanRequest,
      meteredPlatform: meteredAfter.platform - meteredBefore.platform,
      meteredGateway: meteredAfter.gateway - meteredBefore.gateway,
    });
    before = after;
    planBefore = planAfter;
    meteredBefore = meteredAfter;
  }
  await instance.stop();
  return rounds;
}

function checkRounds(rounds: Round[], driver: string) {
  // eslint-disable-next-line no-console
  console.log(
    `${driver}: ${rounds
      .map(
        ({ answered, charged, planAnswered, planCharged }) =>
          `credits: answered ${answered}, charged ${charged} (${signed(charged - answered)}); plan: answered ${planAnswered}, charged ${planCharged} (${signed(planCharged - planAnswered)})`,
      )
      .join("; ")}`,
  );
  for (const round of rounds) {
    for (const [answered, charged] of [
      [round.answered, round.charged],
      [round.planAnswered, round.planCharged],
    ] as const) {
      // Whole requests only: never a part, never one twice.
      expect(Number.isInteger(charged)).toBe(true);
      // Never a charge for an answer the client did not get...
      expect(charged).toBeLessThanOrEqual(answered);
      // ...and at most the requests whose last byte had left when the process died go unbilled,
      // one request's cost each: no more than were in flight.
      expect(answered - charged).toBeLessThanOrEqual(CONCURRENCY);
    }
    // The plan's usage and the usage report are settled in the same durable step as each
    // other: after a kill, the report counts exactly the requests the ledger charged.
    expect(round.meteredPlatform).toBe(round.charged);
    expect(round.meteredGateway).toBe(round.planCharged);
  }
}

function signed(n: number): string {
  return `${n >= 0 ? "+" : ""}${n}`;
}

/** The plan and request budgets high enough that only the kill stops a loop. */
const LIMITS = { PLANS_JSON: PLANS, GATEWAY_API_RATE_LIMIT_RPM: "1000000", GATEWAY_TENANT_RATE_LIMIT_RPM: "100000000" };

describe("no charge without an answer, over several kill -9", () => {
  it("on fs", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-crash-charges-"));
    dirs.push(dir);
    const models = JSON.stringify({ models: { paid: { provider: "openai-compatible", baseURL: providerUrl, price: PRICE } } });
    const rounds = await killRounds(
      { STORAGE: "fs", DATA_DIR: dir, LOG_LEVEL: "error", MODELS_JSON: models, ...LIMITS },
      { STORAGE: "fs", DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: "unused" },
    );
    checkRounds(rounds, "fs");
  }, 400_000);

  it("on Redis", async () => {
    const prefix = uniqueRedisPrefix();
    prefixes.push(prefix);
    const models = JSON.stringify({ models: { paid: { provider: "openai-compatible", baseURL: providerUrl, price: PRICE } } });
    const rounds = await killRounds(
      {
        STORAGE: "redis",
        REDIS_PREFIX: prefix,
        REDIS_URL: TEST_REDIS_URL,
        GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
        LOG_LEVEL: "error",
        MODELS_JSON: models,
        ...LIMITS,
      },
      { STORAGE: "redis", DATA_DIR: "unused", REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix },
    );
    checkRounds(rounds, "redis");
  }, 400_000);
});
