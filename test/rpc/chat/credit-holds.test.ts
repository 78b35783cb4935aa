import { mkdtemp, rm } from "node:fs/promises";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { APIError } from "openai";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { openaiClient, platformAccount, userMessage, type PlatformAccount } from "../../helpers/chat.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";
import { countPromptTokens } from "../../../rpc/chat/tokens.js";
import { createOpenAiUpstream } from "../../../mocks/openai-upstream.js";

/**
 * Credits are reserved before a model runs (docs/models-and-chat.md "Holds", docs/billing.md
 * "Admission"): admitted while the balance less what requests in flight hold is above zero,
 * each hold its worst case capped at what remains. Credits for N requests and 5×N concurrent
 * requests through the official client admit N (N + 1 when half a request's worth is left
 * over: that one is held capped), the balance ends no lower than −(one request's worst case),
 * and every later request gets 402 — on memory, fs, and two instances on one Redis.
 */

const UPSTREAM = "http://holds.upstream.test/v1";
const upstream = createOpenAiUpstream(UPSTREAM);
const msw = mockUpstreams(...upstream.handlers);
const PRICE = { input: 1000, output: 2000 };
const MODELS = () => ({
  models: {
    echo: { provider: "echo", price: PRICE },
    vendor: { provider: "openai-compatible", baseURL: msw.url(UPSTREAM), upstreamModel: "vendor-holds", price: PRICE },
  },
});
const messages = userMessage("x");
// max_tokens 1 and a one-token message: the echo model costs exactly what it holds.
const perRequest = Math.ceil((countPromptTokens(messages) * PRICE.input + 1 * PRICE.output) / 1000);
const N = 10;

const dirs: string[] = [];
const prefixes: string[] = [];
beforeAll(() => msw.listen());
afterAll(async () => {
  await msw.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

async function burst(servers: TestServer[], account: PlatformAccount) {
  const results = await Promise.all(
    Array.from({ length: 5 * N }, async (_, i) => {
      const client = openaiClient(servers[i % servers.length]!, "/api/v1", account.key);
      try {
        if (i % 2) {
          const stream = await client.chat.completions.create({ model: "echo", messages, max_tokens: 1, stream: true });
          for await (const _chunk of stream) {
            // drain
          }
        } else {
          await client.chat.completions.create({ model: "echo", messages, max_tokens: 1 });
        }
        return 200;
      } catch (error) {
        return (error as APIError).status ?? 0;
      }
    }),
  );
  return {
    ok: results.filter((status) => status === 200).length,
    refused: results.filter((status) => status === 402).length,
    other: results.filter((s) => s !== 200 && s !== 402),
  };
}

describe.each(["memory", "fs", "redis"] as const)("credit holds on %s", (driver) => {
  let servers: TestServer[];

  beforeAll(async () => {
    // 25 of a burst stream with one key at once: past QUOTA_STREAMS_PER_KEY's default (docs/quotas.md).
    const env: Record<string, string> = { STORAGE: driver, MODELS_JSON: JSON.stringify(MODELS()), QUOTA_STREAMS_PER_KEY: "1000" };
    if (driver === "fs") {
      const dir = await mkdtemp(join(tmpdir(), "gw-holds-"));
      dirs.push(dir);
      env.DATA_DIR = dir;
    }
    if (driver === "redis") {
      const prefix = uniqueRedisPrefix();
      prefixes.push(prefix);
      env.REDIS_PREFIX = prefix;
      servers = await Promise.all([startTestServer(env), startTestServer(env)]);
    } else {
      servers = [await startTestServer(env)];
    }
  });
  afterAll(async () => {
    for (const server of servers ?? []) {
      expect(server.loggedErrors()).toEqual([]);
      await server.close();
    }
  });

  it(`credits for exactly ${N} requests admit ${N} of ${5 * N} concurrent ones, the balance ends at zero, and later requests get 402`, async () => {
    const account = await platformAccount(servers[0]!, 0);
    await servers[0]!.composition.ports.repos.credits.grant(account.workspaceId, N * perRequest);
    const { ok, refused, other } = await burst(servers, account);
    expect(other).toEqual([]);
    expect(ok).toBe(N);
    expect(refused).toBe(4 * N);
    const { ledger } = servers[0]!.composition.ports.repos;
    expect(await ledger.state(ledger.credits(account.workspaceId))).toMatchObject({ value: 0, held: 0 });
    await expectRefusedAfter(servers, account);
  });

  it(`credits for ${N}½ requests admit ${N + 1} of ${5 * N} concurrent ones (the last held capped), and the balance ends above −(one request's worst case)`, async () => {
    const account = await platformAccount(servers[0]!, 0);
    const half = Math.floor(perRequest / 2);
    await servers[0]!.composition.ports.repos.credits.grant(account.workspaceId, N * perRequest + half);
    const { ok, refused, other } = await burst(servers, account);
    expect(other).toEqual([]);
    expect(ok).toBe(N + 1);
    expect(refused).toBe(5 * N - N - 1);
    const { ledger } = servers[0]!.composition.ports.repos;
    const { value, held } = await ledger.state(ledger.credits(account.workspaceId));
    expect(held).toBe(0);
    expect(value).toBe(half - perRequest);
    expect(value).toBeGreaterThanOrEqual(-perRequest);
    await expectRefusedAfter(servers, account);
  });

  it("never admits past a key's spendLimit under concurrency by more than one request's excess", async () => {
    const account = await platformAccount(servers[0]!, 100);
    const { withCookie } = await import("../../helpers/console.js");
    const patch = (spendLimit: number) =>
      servers[0]!.request(`/api/api-keys/${account.keyId}`, { method: "PATCH", headers: withCookie(account.cookie), json: { spendLimit } });
    expect((await patch((3 * perRequest) / 1_000_000)).status).toBe(200);
    const exact = await burst(servers, account);
    expect(exact.ok).toBe(3);
    expect(exact.refused).toBe(5 * N - 3);
    // Half a request more of spend limit: one more request is served, held capped.
    expect((await patch((3.5 * perRequest) / 1_000_000)).status).toBe(200);
    const more = await burst(servers, account);
    expect(more.ok).toBe(1);
    const { ledger } = servers[0]!.composition.ports.repos;
    const spent = (await ledger.state(ledger.keySpend(account.keyId))).value;
    expect(spent).toBe(4 * perRequest);
    expect(spent - 3.5 * perRequest).toBeLessThanOrEqual(perRequest);
  });
});

/** Once the balance is spent, every request is 402 `Insufficient credits`, on every instance. */
async function expectRefusedAfter(servers: TestServer[], account: PlatformAccount) {
  for (const server of servers) {
    const client = openaiClient(server, "/api/v1", account.key);
    for (const stream of [false, true]) {
      const error = (await client.chat.completions
        .create({ model: "echo", messages, max_tokens: 1, stream })
        .catch((e: unknown) => e)) as APIError;
      expect(error.status).toBe(402);
      expect(error.error).toMatchObject({ message: "Insufficient credits", type: "insufficient_quota" });
    }
    await expect(client.models.list()).rejects.toMatchObject({ status: 402 });
  }
}

describe("a hold ends exactly once, however the request ends", () => {
  let server: TestServer;
  let account: PlatformAccount;
  const state = () => server.composition.ports.repos.ledger.state(server.composition.ports.repos.ledger.credits(account.workspaceId));

  beforeAll(async () => {
    server = await startTestServer({ MODELS_JSON: JSON.stringify(MODELS()), HOLD_LEASE_SECONDS: "60" });
    account = await platformAccount(server, 1);
  });
  afterAll(async () => {
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  it("releases the whole hold when the upstream fails", async () => {
    upstream.script("vendor-holds", { kind: "error", status: 500, body: { error: { message: "boom", type: "server_error" } } });
    const before = await state();
    await expect(
      openaiClient(server, "/api/v1", account.key).chat.completions.create({ model: "vendor", messages }),
    ).rejects.toBeInstanceOf(APIError);
    expect(await state()).toEqual({ ...before, held: 0 });
  });

  it("settles to what was streamed when the client drops, and releases the rest", async () => {
    upstream.script("vendor-holds", { kind: "stream", words: ["one", " two", " three"], hangAfter: 2 });
    const before = await state();
    const controller = new AbortController();
    const stream = await openaiClient(server, "/api/v1", account.key).chat.completions.create(
      { model: "vendor", messages, stream: true, max_tokens: 100 },
      { signal: controller.signal },
    );
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    // In flight: the most the request can cost is held.
    expect((await state()).held).toBe(Math.ceil((countPromptTokens(messages) * PRICE.input + 100 * PRICE.output) / 1000));
    controller.abort();
    await vi.waitFor(async () => expect((await state()).held).toBe(0));
    expect(before.value - (await state()).value).toBeGreaterThan(0);
    expect(before.value - (await state()).value).toBeLessThan(perRequest * 100);
  });

  it("holds the worst case with the model's output cap when max_tokens is absent, capped at what remains", async () => {
    const prompt = countPromptTokens(messages);
    const worst = Math.ceil((prompt * PRICE.input + 4096 * PRICE.output) / 1000);
    for (const [credits, expected] of [
      [1_000_000, worst],
      [100, 100],
    ] as const) {
      const small = await platformAccount(server, 0);
      await server.composition.ports.repos.credits.grant(small.workspaceId, credits);
      const ledgerState = () =>
        server.composition.ports.repos.ledger.state(server.composition.ports.repos.ledger.credits(small.workspaceId));
      upstream.script("vendor-holds", { kind: "stream", words: ["one", " two", " three"], hangAfter: 1 });
      const controller = new AbortController();
      const stream = await openaiClient(server, "/api/v1", small.key).chat.completions.create(
        { model: "vendor", messages, stream: true },
        { signal: controller.signal },
      );
      await stream[Symbol.asyncIterator]().next();
      expect((await ledgerState()).held).toBe(expected);
      controller.abort();
      await vi.waitFor(async () => expect((await ledgerState()).held).toBe(0));
    }
  });

  it("releases a hold left by a process that died once its lease runs out", async () => {
    const { ledger } = server.composition.ports.repos;
    const balance = (await state()).value;
    // What a killed process leaves behind: a hold on the whole balance that nobody settles.
    expect(await ledger.hold("hold_dead", [{ account: ledger.credits(account.workspaceId), amount: balance }], 60_000)).toBeNull();
    const client = openaiClient(server, "/api/v1", account.key);
    await expect(client.chat.completions.create({ model: "echo", messages, max_tokens: 1 })).rejects.toMatchObject({ status: 402 });
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 61_000 });
    try {
      await client.chat.completions.create({ model: "echo", messages, max_tokens: 1 });
      expect(await state()).toEqual({ value: balance - perRequest, held: 0, ttlMs: 0 });
    } finally {
      vi.useRealTimers();
    }
  });
});
