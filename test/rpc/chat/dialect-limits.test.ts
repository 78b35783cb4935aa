import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { eventually } from "../../helpers/eventually.js";
import { openStream, startHeldUpstream, type HeldUpstream } from "../../helpers/held-stream.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";

/**
 * The Responses and Messages dialects meet the same limits as chat completions (docs/dialects.md):
 * the plan allowance (its hold, then 429) and the streams in flight per key
 * (QUOTA_STREAMS_PER_KEY, shared with chat completions), each refusal in the route's envelope;
 * a stream whose client goes away gives its place back and is metered for what was streamed. On
 * memory storage and on Redis, where holds, places and usage are shared by every instance.
 */

const PLANS = {
  free: { name: "Free", tokensPerWindow: 1_000_000, windowSeconds: 3600 },
  small: { name: "Small", tokensPerWindow: 60, windowSeconds: 3600 },
};

describe.each(["memory", "redis"])("on %s storage", (storage) => {
  let server: TestServer;
  let upstream: HeldUpstream;
  const prefix = uniqueRedisPrefix();

  beforeAll(async () => {
    upstream = await startHeldUpstream();
    server = await startTestServer({
      ...(storage === "redis" ? { STORAGE: "redis", REDIS_PREFIX: prefix } : {}),
      QUOTA_STREAMS_PER_KEY: "1",
      PLANS_JSON: JSON.stringify(PLANS),
      MODELS_JSON: JSON.stringify({
        models: { "echo-1": { provider: "echo" }, held: { provider: "openai-compatible", baseURL: upstream.url } },
      }),
    });
  });

  afterAll(async () => {
    upstream.finish();
    await server?.close();
    await upstream.close();
    if (storage === "redis") await dropRedisPrefix(prefix);
  });

  async function gatewayKey(token: string) {
    return (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(token), json: { name: "k" } })).body
      .key as string;
  }

  describe("limits on the dialects", () => {
    it("the plan allowance: served while some remains, then 429 in each route's envelope", async () => {
      const user = await registerUser(server);
      const record = (await server.composition.ports.repos.users.get(user.user.id))!;
      await server.composition.ports.repos.users.put({ ...record, plan: "small" });
      const first = await server.request("/gateway/v1/messages", {
        method: "POST",
        headers: bearer(user.token),
        json: { model: "echo-1", max_tokens: 100, messages: [{ role: "user", content: "spend some of the allowance please" }] },
      });
      expect(first.status).toBe(200);
      const models = await server.request("/gateway/v1/usage/models", { headers: bearer(user.token) });
      expect(models.body.rows[0]).toMatchObject({ requests: 1, inputTokens: first.body.usage.input_tokens, outputTokens: 6 });
      // A prompt larger than what remains is refused before any model runs, naming the plan.
      const tooLong = await server.request("/gateway/v1/responses", {
        method: "POST",
        headers: bearer(user.token),
        json: { model: "echo-1", input: "and the rest of it ".repeat(12) },
      });
      expect(tooLong.status).toBe(429);
      expect(tooLong.body.error).toMatchObject({ code: "QUOTA_EXCEEDED" });
      expect(tooLong.body.error.message).toMatch(
        /^This request's prompt of \d+ tokens is more than the \d+ tokens left of the Small plan's allowance of 60 tokens/,
      );
      const spend = await server.request("/gateway/v1/responses", {
        method: "POST",
        headers: bearer(user.token),
        // Its prompt fits; its worst case is capped at what remains; it is settled to what it used, past the allowance.
        json: { model: "echo-1", input: "and the rest of it ".repeat(6) },
      });
      expect(spend.status).toBe(200);
      expect(first.body.usage.input_tokens + first.body.usage.output_tokens + spend.body.usage.total_tokens).toBeGreaterThan(
        PLANS.small.tokensPerWindow,
      );
      const messages = await server.request("/gateway/v1/messages", {
        method: "POST",
        headers: bearer(user.token),
        json: { model: "echo-1", max_tokens: 10, messages: [{ role: "user", content: "x" }] },
      });
      expect(messages.status).toBe(429);
      expect(messages.body).toEqual({
        type: "error",
        error: {
          type: "rate_limit_error",
          message: `You have used the Small plan's allowance of ${PLANS.small.tokensPerWindow} tokens for this period`,
        },
      });
      const responses = await server.request("/gateway/v1/responses", {
        method: "POST",
        headers: bearer(user.token),
        json: { model: "echo-1", input: "x" },
      });
      expect(responses.status).toBe(429);
      expect(responses.body.error).toMatchObject({ code: "QUOTA_EXCEEDED" });
    });

    it("streams in flight per key count chat completions, Responses and Messages together; a dropped stream frees its place and is metered", async () => {
      const user = await registerUser(server);
      const key = await gatewayKey(user.token);
      const url = (path: string) => server.url(`/gateway/v1${path}`);
      const messages = await openStream(
        url("/messages"),
        { "x-api-key": key },
        {
          model: "held",
          max_tokens: 50,
          stream: true,
          messages: [{ role: "user", content: "hold on" }],
        },
      );
      expect(messages.status).toBe(200);
      const refusedResponses = await openStream(url("/responses"), bearer(key), { model: "held", input: "x", stream: true });
      expect(refusedResponses.status).toBe(429);
      expect(refusedResponses.body.error).toMatchObject({ code: "RATE_LIMITED" });
      const refusedChat = await openStream(url("/chat/completions"), bearer(key), {
        model: "held",
        stream: true,
        messages: [{ role: "user", content: "x" }],
      });
      expect(refusedChat.status).toBe(429);
      const refusedMessages = await openStream(
        url("/messages"),
        { "x-api-key": key },
        {
          model: "held",
          max_tokens: 5,
          stream: true,
          messages: [{ role: "user", content: "x" }],
        },
      );
      expect(refusedMessages.status).toBe(429);
      expect(refusedMessages.body).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
      expect(upstream.open()).toBe(1);

      // The client goes away: the place is given back and what was streamed ("held ") is metered.
      messages.cancel();
      const responses = (await eventually(async () => {
        const res = await openStream(url("/responses"), bearer(key), { model: "held", input: "x", stream: true });
        return res.status === 200 ? res : undefined;
      }))!;
      upstream.finish();
      const rest = await responses.rest();
      expect(rest).toContain("event: response.completed");
      expect(rest).not.toContain("[DONE]");
      const usage = await eventually(async () => {
        const res = await server.request("/gateway/v1/usage/models", { headers: bearer(user.token) });
        const row = res.body.rows.find((entry: { model: string }) => entry.model === "held");
        return row?.requests === 2 ? row : undefined;
      });
      // The dropped stream's estimate (1 token streamed) and the finished one's reported usage (5 + 1).
      expect(usage).toMatchObject({ requests: 2, outputTokens: 2 });
    });
  });
});
