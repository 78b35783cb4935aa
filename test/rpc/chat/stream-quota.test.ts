import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { platformAccount } from "../../helpers/chat.js";
import { eventually } from "../../helpers/eventually.js";
import { openStream, startHeldUpstream, type HeldUpstream } from "../../helpers/held-stream.js";

/**
 * QUOTA_STREAMS_PER_KEY (docs/quotas.md): streams in flight per credential, streamed chat on
 * every surface and streamed agent invocations together; one more is a 429 before the stream
 * starts, in the surface's envelope; another key is not affected; a stream that ends or whose
 * client goes away gives its place back.
 */
describe("streams in flight per key", () => {
  let server: TestServer;
  let upstream: HeldUpstream;
  beforeAll(async () => {
    upstream = await startHeldUpstream();
    const models = { held: { provider: "openai-compatible", baseURL: upstream.url }, echo: { provider: "echo" } };
    server = await startTestServer({ QUOTA_STREAMS_PER_KEY: "2", MODELS_JSON: JSON.stringify({ models }) });
  });
  afterAll(async () => {
    upstream.finish();
    await server.close();
    await upstream.close();
  });

  const chat = { model: "held", messages: [{ role: "user", content: "hi" }], stream: true };
  const platform = (key: string) => openStream(server.url("/api/v1/chat/completions"), bearer(key), chat);

  it("refuses a Platform key's third stream with 429 and lets another key stream", async () => {
    const account = await platformAccount(server);
    const other = await platformAccount(server);
    const [one, two] = [await platform(account.key), await platform(account.key)];
    expect([one.status, two.status]).toEqual([200, 200]);

    const refused = await platform(account.key);
    expect(refused.status).toBe(429);
    // The Platform's envelope and headers (docs/interface.md 7.2: no Retry-After there).
    expect(refused.body).toEqual({
      error: {
        message: "Quota reached: this credential has 2 stream(s) in flight, the most allowed (limit 2); retry once one ends",
        type: "rate_limit_error",
        code: "rate_limited",
      },
    });
    expect(refused.headers.get("retry-after")).toBeNull();
    // Nothing was sent upstream for it, and a request that does not stream is not counted.
    expect(upstream.open()).toBe(2);
    const plain = await server.request("/api/v1/chat/completions", {
      method: "POST",
      headers: bearer(account.key),
      json: { model: "echo", messages: chat.messages },
    });
    expect(plain.status).toBe(200);

    // Another key (another tenant) streams.
    const others = await platform(other.key);
    expect(others.status).toBe(200);

    // A client that goes away gives its place back.
    one.cancel();
    const third = (await eventually(async () => {
      const res = await platform(account.key);
      return res.status === 200 ? res : undefined;
    }))!;
    // Streams that end give theirs back too.
    upstream.finish();
    for (const stream of [two, third, others]) expect(await stream.rest()).toContain("[DONE]");
    const after = await Promise.all([platform(account.key), platform(account.key)]);
    expect(after.map((res) => res.status)).toEqual([200, 200]);
    upstream.finish();
    for (const stream of after) await stream.rest();
  });

  it("counts a Gateway key's chat and agent streams together, refused in the Gateway's envelope; the Account API in its own", async () => {
    const user = await registerUser(server);
    const key = (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(user.token), json: { name: "streams" } }))
      .body.key as string;
    const agent = await server.request("/gateway/v1/agents", {
      method: "POST",
      headers: bearer(user.token),
      json: { name: "held", model: "held", tools: [], description: "" },
    });
    expect(agent.status).toBe(201);

    const run = await openStream(server.url(`/gateway/v1/agents/${agent.body.id}/invoke`), bearer(key), { input: "go", stream: true });
    expect(run.status).toBe(200);
    const answer = await openStream(server.url("/gateway/v1/chat/completions"), bearer(key), chat);
    expect(answer.status).toBe(200);
    const refused = await openStream(server.url("/gateway/v1/chat/completions"), bearer(key), chat);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toEqual({
      code: "RATE_LIMITED",
      message: expect.stringContaining("stream(s) in flight, the most allowed (limit 2)"),
      requestId: refused.headers.get("x-request-id"),
      details: { quota: "streams_per_key", limit: 2, count: 2 },
    });
    expect(refused.headers.get("retry-after")).toBe("1");
    const agentRefused = await openStream(server.url(`/gateway/v1/agents/${agent.body.id}/invoke`), bearer(key), {
      input: "go",
      stream: true,
    });
    expect(agentRefused.status).toBe(429);
    // The same user's session is another credential.
    const session = await openStream(server.url("/gateway/v1/chat/completions"), bearer(user.token), chat);
    expect(session.status).toBe(200);

    // A personal key on the Account API: its own two, then the Account envelope.
    const personal = (await server.request("/account/v1/keys", { method: "POST", headers: bearer(user.token), json: { name: "acct" } }))
      .body.key as string;
    const account = [
      await openStream(server.url("/account/v1/chat/completions"), bearer(personal), chat),
      await openStream(server.url("/account/v1/chat/completions"), bearer(personal), chat),
    ];
    expect(account.map((res) => res.status)).toEqual([200, 200]);
    const accountRefused = await openStream(server.url("/account/v1/chat/completions"), bearer(personal), chat);
    expect(accountRefused.status).toBe(429);
    expect(accountRefused.body).toEqual({
      error: { message: expect.stringContaining("stream(s) in flight, the most allowed (limit 2)"), type: "rate_limit_error" },
    });

    upstream.finish();
    for (const stream of [run, answer, session, ...account]) await stream.rest();
    await eventually(async () => {
      upstream.finish();
      const again = await openStream(server.url("/gateway/v1/chat/completions"), bearer(key), chat);
      if (again.status !== 200) return undefined;
      upstream.finish();
      await again.rest();
      return true;
    });
  });

  it("lets N concurrent streams at the edge take exactly the places left", async () => {
    const user = await registerUser(server);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => openStream(server.url("/gateway/v1/chat/completions"), bearer(user.token), chat)),
    );
    expect(results.filter((res) => res.status === 200)).toHaveLength(2);
    expect(results.filter((res) => res.status === 429)).toHaveLength(6);
    upstream.finish();
    for (const res of results) await res.rest();
  });
});
