import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { APIError } from "openai";
import { startOnDriver, startTestServer, type TestServer } from "../../helpers/server.js";
import { openaiClient, platformAccount, userMessage, type PlatformAccount } from "../../helpers/chat.js";
import { countPromptTokens } from "../../../rpc/chat/tokens.js";
import { createOpenAiUpstream } from "../../../mocks/openai-upstream.js";

/**
 * Credits are reserved before a model runs (docs/models-and-chat.md "Holds", docs/billing.md
 * "Admission"): admitted while the balance less what requests in flight hold is above zero and
 * the prompt's own cost fits in it, each hold its worst case capped at what remains. Credits
 * for N requests and 5×N concurrent requests through the official client admit N (N + 1 when
 * what is left over covers a prompt but not its output: that one is held capped), the balance
 * ends no lower than −(one request's output), and every later request gets 402 — on memory,
 * fs, and two instances on one Redis. A prompt dearer than what remains is refused whatever the
 * concurrency, so a large prompt never takes a small balance far below zero.
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
/** What the prompt alone costs: known before the model runs. */
const promptCost = Math.ceil((countPromptTokens(messages) * PRICE.input) / 1000);
const N = 10;

beforeAll(() => msw.listen());
afterAll(() => msw.close());

async function burst(
  servers: TestServer[],
  account: PlatformAccount,
  body: { messages: typeof messages; max_tokens: number } = { messages, max_tokens: 1 },
) {
  const results = await Promise.all(
    Array.from({ length: 5 * N }, async (_, i) => {
      const client = openaiClient(servers[i % servers.length]!, "/api/v1", account.key);
      try {
        if (i % 2) {
          const stream = await client.chat.completions.create({ model: "echo", ...body, stream: true });
          for await (const _chunk of stream) {
            // drain
          }
        } else {
          await client.chat.completions.create({ model: "echo", ...body });
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
  let close: () => Promise<void>;

  beforeAll(async () => {
    // 25 of a burst stream with one key at once: past QUOTA_STREAMS_PER_KEY's default (docs/quotas.md).
    ({ servers, close } = await startOnDriver(driver, { MODELS_JSON: JSON.stringify(MODELS()), QUOTA_STREAMS_PER_KEY: "1000" }));
  });
  afterAll(() => close?.());

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

  it(`credits for ${N} requests and a prompt admit ${N + 1} of ${5 * N} concurrent ones (the last held capped), and the balance ends above −(one request's output)`, async () => {
    const account = await platformAccount(servers[0]!, 0);
    const left = perRequest - 1; // covers a prompt (promptCost), not its whole worst case
    expect(left).toBeGreaterThanOrEqual(promptCost);
    await servers[0]!.composition.ports.repos.credits.grant(account.workspaceId, N * perRequest + left);
    const { ok, refused, other } = await burst(servers, account);
    expect(other).toEqual([]);
    expect(ok).toBe(N + 1);
    expect(refused).toBe(5 * N - N - 1);
    const { ledger } = servers[0]!.composition.ports.repos;
    const { value, held } = await ledger.state(ledger.credits(account.workspaceId));
    expect(held).toBe(0);
    expect(value).toBe(left - perRequest);
    expect(value).toBeGreaterThanOrEqual(-(perRequest - promptCost));
    await expectRefusedAfter(servers, account);
  });

  it(`credits for ${N} requests and less than a prompt admit ${N}: the balance stays above zero and a prompt dearer than it gets 402`, async () => {
    const account = await platformAccount(servers[0]!, 0);
    const left = promptCost - 1;
    await servers[0]!.composition.ports.repos.credits.grant(account.workspaceId, N * perRequest + left);
    const { ok, refused, other } = await burst(servers, account);
    expect(other).toEqual([]);
    expect(ok).toBe(N);
    expect(refused).toBe(4 * N);
    const { ledger } = servers[0]!.composition.ports.repos;
    expect(await ledger.state(ledger.credits(account.workspaceId))).toMatchObject({ value: left, held: 0 });
    for (const server of servers) {
      const error = (await openaiClient(server, "/api/v1", account.key)
        .chat.completions.create({ model: "echo", messages, max_tokens: 1 })
        .catch((e: unknown) => e)) as APIError;
      expect(error.status).toBe(402);
      expect(error.error).toMatchObject({
        type: "insufficient_quota",
        message: `Insufficient credits: this request's prompt alone costs ${promptCost} micro-credits, more than the ${left} left in the workspace's balance`,
      });
      expect(error.headers?.get("x-service-request-id")).toBeNull();
      // The balance is above zero: what costs nothing to read is still served (spec 7.2: 402 at zero or below).
      expect((await openaiClient(server, "/api/v1", account.key).models.list()).data.length).toBeGreaterThan(0);
    }
  });

  it("a large prompt on a small balance: refused under any concurrency, nothing past the bound, and a prompt that fits is still served", async () => {
    const account = await platformAccount(servers[0]!, 0);
    const large = userMessage("word ".repeat(2_000));
    const largeCost = Math.ceil((countPromptTokens(large) * PRICE.input) / 1000);
    // Room for three large requests and part of a fourth's prompt.
    const worst = largeCost + Math.ceil((5 * PRICE.output) / 1000);
    const grant = 3 * worst + Math.floor(largeCost / 2);
    await servers[0]!.composition.ports.repos.credits.grant(account.workspaceId, grant);
    const { ok, refused, other } = await burst(servers, account, { messages: large, max_tokens: 5 });
    expect(other).toEqual([]);
    expect(ok).toBe(3);
    expect(refused).toBe(5 * N - 3);
    const { ledger } = servers[0]!.composition.ports.repos;
    const after = await ledger.state(ledger.credits(account.workspaceId));
    expect(after.held).toBe(0);
    // Never below zero by more than one request's output (here: not below zero at all).
    expect(after.value).toBeGreaterThanOrEqual(0);
    expect(after.value).toBeGreaterThanOrEqual(grant - 3 * worst);
    // What still fits (a small prompt) is served on every instance while the balance lasts.
    for (const server of servers) {
      const answer = await openaiClient(server, "/api/v1", account.key).chat.completions.create({ model: "echo", messages, max_tokens: 1 });
      expect(answer.choices[0]!.message.content).toBe("x");
    }
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
    // Less than a prompt more of spend limit: nothing more is served, and the refusal names the limit.
    expect((await patch((3 * perRequest + promptCost - 1) / 1_000_000)).status).toBe(200);
    const none = await burst(servers, account);
    expect(none.ok).toBe(0);
    const error = (await openaiClient(servers[0]!, "/api/v1", account.key)
      .chat.completions.create({ model: "echo", messages, max_tokens: 1 })
      .catch((e: unknown) => e)) as APIError;
    expect(error.status).toBe(402);
    expect(error.error).toMatchObject({
      type: "insufficient_quota",
      message:
        `This request's prompt alone costs ${promptCost} micro-credits, more than the ${promptCost - 1} left of ` +
        `this API key's spend limit of ${(3 * perRequest + promptCost - 1) / 1_000_000} credits`,
    });
    // A prompt's worth more: one more request is served, held capped; the limit is passed by less than its output.
    const limit = 3 * perRequest + perRequest - 1;
    expect((await patch(limit / 1_000_000)).status).toBe(200);
    const more = await burst(servers, account);
    expect(more.ok).toBe(1);
    const { ledger } = servers[0]!.composition.ports.repos;
    const spent = (await ledger.state(ledger.keySpend(account.keyId))).value;
    expect(spent).toBe(4 * perRequest);
    expect(spent - limit).toBeLessThanOrEqual(perRequest - promptCost);
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
