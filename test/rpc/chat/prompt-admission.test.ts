import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startOnDriver, type TestServer } from "../../helpers/server.js";
import { countPromptTokens } from "../../../rpc/chat/tokens.js";

/**
 * Admission knows the prompt (docs/billing.md "Admission", docs/quotas.md): a request whose
 * prompt alone passes what remains of the user's plan allowance or of a tenant's month is
 * refused before any model runs, in its surface's envelope, and what remains is untouched;
 * concurrent requests, on two instances on one Redis as on memory and fs, never take a limit
 * past it by more than one request's output, and what still fits is served. Covered: chat
 * completions on the Account and Gateway APIs, the Gateway's `/messages` and `/embeddings`,
 * and agent invocations (the tenant's `tokensPerMonth`). Credits and key limits:
 * test/rpc/chat/credit-holds.test.ts and chat-limits.test.ts.
 */

const ALLOWANCE = 200;
const PLANS = { free: { name: "Free", tokensPerWindow: ALLOWANCE, windowSeconds: 3600 } };
const MODELS = { models: { "echo-1": { provider: "echo" }, "echo-embed": { provider: "echo", mode: "embedding" } } };
/** The output cap every chat request here sends: the bound of what one request may pass a limit by. */
const OUTPUT = 5;
const words = (n: number) => "word ".repeat(n).trim();
const HUGE = words(5_000);

type Surface = "account chat" | "gateway chat" | "gateway messages" | "gateway embeddings";
const SURFACES: Surface[] = ["account chat", "gateway chat", "gateway messages", "gateway embeddings"];

/** The request of `surface` with a prompt of `text`, and the status and body it gets. */
function call(server: TestServer, surface: Surface, credential: string, text: string) {
  const messages = [{ role: "user", content: text }];
  switch (surface) {
    case "account chat":
      return server.request("/account/v1/chat/completions", {
        method: "POST",
        headers: bearer(credential),
        json: { model: "echo-1", messages, max_tokens: OUTPUT },
      });
    case "gateway chat":
      return server.request("/gateway/v1/chat/completions", {
        method: "POST",
        headers: bearer(credential),
        json: { model: "echo-1", messages, max_tokens: OUTPUT },
      });
    case "gateway messages":
      return server.request("/gateway/v1/messages", {
        method: "POST",
        headers: { "x-api-key": credential },
        json: { model: "echo-1", messages, max_tokens: OUTPUT },
      });
    case "gateway embeddings":
      return server.request("/gateway/v1/embeddings", {
        method: "POST",
        headers: bearer(credential),
        json: { model: "echo-embed", input: text },
      });
  }
}

describe.each(["memory", "fs", "redis"] as const)("admission knows the prompt on %s", (driver) => {
  let servers: TestServer[];
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ servers, close } = await startOnDriver(driver, {
      PLANS_JSON: JSON.stringify(PLANS),
      MODELS_JSON: JSON.stringify(MODELS),
      QUOTA_STREAMS_PER_KEY: "1000",
    }));
  });
  afterAll(() => close?.());

  /** A fresh user on the 200-token plan and the credential `surface` takes. */
  async function caller(surface: Surface) {
    const user = await registerUser(servers[0]!);
    let credential = user.token;
    if (surface === "account chat") {
      const key = await servers[0]!.request("/account/v1/keys", { method: "POST", headers: bearer(user.token), json: { name: "k" } });
      credential = key.body.key as string;
    } else if (surface === "gateway messages") {
      const key = await servers[0]!.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(user.token), json: { name: "k" } });
      credential = key.body.key as string;
    }
    const { ledger } = servers[0]!.composition.ports.repos;
    const plan = () => ledger.state(ledger.planTokens(user.user.id, PLANS.free.windowSeconds * 1000));
    return { credential, plan };
  }

  it.each(SURFACES)(
    "%s: a prompt larger than what remains of the plan is refused (429 naming the plan); a prompt that fits is served",
    async (surface) => {
      const { credential, plan } = await caller(surface);
      const first = await call(servers[0]!, surface, credential, words(20));
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      const used = (await plan()).value;
      expect(used).toBeGreaterThan(0);
      expect(used).toBeLessThan(ALLOWANCE);
      for (const server of servers) {
        const refused = await call(server, surface, credential, HUGE);
        expect(refused.status, JSON.stringify(refused.body)).toBe(429);
        // Each surface's envelope carries the message at error.message (Anthropic's adds type: "error").
        if (surface === "gateway messages") expect(refused.body).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
        expect(refused.body.error.message).toMatch(
          new RegExp(
            `^This request's prompt of \\d+ tokens is more than the ${ALLOWANCE - used} tokens left of the Free plan's allowance of ${ALLOWANCE} tokens`,
          ),
        );
        expect(refused.headers.get("x-service-request-id")).toBeNull();
        // Nothing was taken, nothing is left held.
        expect(await plan()).toMatchObject({ value: used, held: 0 });
      }
      const fits = await call(servers[servers.length - 1]!, surface, credential, words(10));
      expect(fits.status).toBe(200);
      expect((await plan()).value).toBeGreaterThan(used);
    },
  );

  it.each(SURFACES)("%s: concurrent requests on every instance end no further past the plan than one request's output", async (surface) => {
    const { credential, plan } = await caller(surface);
    // Each prompt is about a quarter of the allowance: three fit whole, a fourth's prompt does not.
    const text = words(45);
    const prompt = surface === "gateway embeddings" ? 45 : countPromptTokens([{ role: "user", content: text }]);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => call(servers[i % servers.length]!, surface, credential, text)));
    const statuses = results.map((res) => res.status);
    expect(statuses.filter((status) => status !== 200 && status !== 429)).toEqual([]);
    const served = statuses.filter((status) => status === 200).length;
    const { value, held } = await plan();
    expect(held).toBe(0);
    // What fits is served: every request whose prompt and output fit whole, and at most one more.
    const whole = Math.floor(ALLOWANCE / (prompt + (surface === "gateway embeddings" ? 0 : OUTPUT)));
    expect(served).toBeGreaterThanOrEqual(whole);
    expect(served).toBeLessThanOrEqual(whole + 1);
    // Nothing past the bound: the plan is passed by at most one request's output.
    expect(value).toBeLessThanOrEqual(ALLOWANCE + (surface === "gateway embeddings" ? 0 : OUTPUT));
  });

  it("tool definitions are part of the prompt: a small message with a large tools array is refused on a small plan", async () => {
    const { credential, plan } = await caller("gateway chat");
    const tools = Array.from({ length: 20 }, (_, i) => ({
      type: "function",
      function: { name: `tool_${i}`, description: words(20), parameters: { type: "object", properties: {} } },
    }));
    const refused = await servers[0]!.request("/gateway/v1/chat/completions", {
      method: "POST",
      headers: bearer(credential),
      json: { model: "echo-1", messages: [{ role: "user", content: "hi" }], max_tokens: OUTPUT, tools },
    });
    expect(refused.status).toBe(429);
    expect(refused.body.error.message).toMatch(/^This request's prompt of \d+ tokens is more than the 200 tokens left/);
    expect(await plan()).toMatchObject({ value: 0, held: 0 });
    // Without the tools the same message is served.
    const served = await servers[0]!.request("/gateway/v1/chat/completions", {
      method: "POST",
      headers: bearer(credential),
      json: { model: "echo-1", messages: [{ role: "user", content: "hi" }], max_tokens: OUTPUT },
    });
    expect(served.status).toBe(200);
  });

  it("agent invocations: a model turn whose prompt passes what remains of the tenant's month is refused; one that fits is served", async () => {
    const owner = await registerUser(servers[0]!);
    const G = "/gateway/v1";
    const tenant = await servers[0]!.request(`${G}/tenants`, {
      method: "POST",
      headers: bearer(owner.token),
      json: { slug: `prompt-${driver}-${Date.now()}`, name: "T", limits: { agents: 2, tokensPerMonth: ALLOWANCE } },
    });
    expect(tenant.status).toBe(201);
    const agent = await servers[0]!.request(`${G}/agents`, {
      method: "POST",
      headers: bearer(owner.token),
      json: { name: "a", model: "echo-1", tools: [], tenantId: tenant.body.id, config: { maxTokens: OUTPUT } },
    });
    expect(agent.status).toBe(201);
    const invoke = (server: TestServer, input: string) =>
      server.request(`${G}/agents/${agent.body.id}/invoke`, { method: "POST", headers: bearer(owner.token), json: { input } });
    const month = async () =>
      (await servers[0]!.request(`${G}/tenants/${tenant.body.id}`, { headers: bearer(owner.token) })).body.usage.tokensThisMonth as number;
    for (const server of servers) {
      const refused = await invoke(server, HUGE);
      expect(refused.status).toBe(429);
      expect(refused.body.error.message).toMatch(
        /^Token allowance too small for this model turn: its prompt of \d+ tokens is more than the 200 tokens left/,
      );
      expect(refused.body.error.details).toMatchObject({ limit: ALLOWANCE, used: 0 });
    }
    expect(await month()).toBe(0);
    // Concurrent turns of about a quarter of the month each: the month ends at most one output past its limit.
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => invoke(servers[i % servers.length]!, words(45))));
    expect(results.map((res) => res.status).filter((status) => status !== 200 && status !== 429)).toEqual([]);
    const served = results.filter((res) => res.status === 200 && res.body.status === "completed").length;
    expect(served).toBeGreaterThanOrEqual(3);
    const used = await month();
    expect(used).toBeLessThanOrEqual(ALLOWANCE + OUTPUT);
    expect(used).toBeGreaterThan(0);
  });
});
