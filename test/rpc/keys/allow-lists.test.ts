import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { platformAccount } from "../../helpers/chat.js";
import { consoleSignIn, withCookie } from "../../helpers/console.js";
import { connectVm, vmSocketUrl, type TestVm } from "../../helpers/vm.js";

/**
 * Allow-lists (docs/access-control.md): two keys of one user with different lists, and two
 * tenants, over every chat surface and dialect, the model lists, the REST tool routes, the VM
 * tool route and MCP `tools/list` / `tools/call` with the real SDK client.
 */

const MODELS = {
  "echo-1": { provider: "echo" },
  "echo-2": { provider: "echo" },
  "gpt-4o-mini": { provider: "echo" },
  "echo-embed": { provider: "echo", mode: "embedding", price: { input: 10, output: 0 } },
};

let server: TestServer;
let alice: Awaited<ReturnType<typeof registerUser>>;
let bob: Awaited<ReturnType<typeof registerUser>>;
/** Alice's two gateway keys: echo models and the calculator only; gpt-4 models and any tool. */
let narrow: { id: string; key: string };
let wide: { id: string; key: string };
let vm: TestVm;

/** An error body without its request id (each answer has its own). */
const withoutRequestId = (body: { error: Record<string, unknown> }) => ({ ...body, error: { ...body.error, requestId: undefined } });

const chat = (model: string) => ({ model, messages: [{ role: "user", content: "hi" }] });

async function gatewayKey(token: string, json: Record<string, unknown>) {
  const res = await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(token), json: { name: "k", ...json } });
  expect(res.status).toBe(201);
  return res.body as { id: string; key: string; allowedModels: string[] | null; allowedTools: string[] | null };
}

beforeAll(async () => {
  server = await startTestServer({ MODELS_JSON: JSON.stringify({ models: MODELS }) });
  alice = await registerUser(server);
  bob = await registerUser(server);
  const made = await gatewayKey(alice.token, { allowedModels: ["echo-1", "echo-embed"], allowedTools: ["calculator", "vm__allow-vm__ok"] });
  expect(made).toMatchObject({ allowedModels: ["echo-1", "echo-embed"], allowedTools: ["calculator", "vm__allow-vm__ok"] });
  narrow = made;
  wide = await gatewayKey(alice.token, { allowedModels: ["gpt-4*"] });
  vm = await connectVm(vmSocketUrl(server.origin, "agent", { vmId: "allow-vm" }), alice.token, {
    "tools/call": ({ name }) => ({ content: [{ type: "text", text: `ran ${name}` }] }),
  });
  await vm.register([{ name: "ok" }, { name: "secret" }]);
});

afterAll(async () => {
  await vm?.close();
  expect(server.loggedErrors()).toEqual([]);
  await server.close();
});

describe("model allow-lists", () => {
  it("holds two keys of one user to their own lists on Gateway chat, with the usable ids filtered", async () => {
    const ok = await server.request("/gateway/v1/chat/completions", { method: "POST", headers: bearer(narrow.key), json: chat("echo-1") });
    expect(ok.status).toBe(200);
    const refused = await server.request("/gateway/v1/chat/completions", {
      method: "POST",
      headers: bearer(narrow.key),
      json: chat("gpt-4o-mini"),
    });
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toBe("The model 'gpt-4o-mini' is not available on this API. Usable models: echo-1");
    // The same refusal as an unknown model, with the same envelope.
    const unknown = await server.request("/gateway/v1/chat/completions", {
      method: "POST",
      headers: bearer(narrow.key),
      json: chat("nope"),
    });
    expect(unknown.status).toBe(403);
    expect(unknown.body.error.message).toBe("The model 'nope' is not available on this API. Usable models: echo-1");
    expect(Object.keys(refused.body.error).sort()).toEqual(Object.keys(unknown.body.error).sort());

    expect(
      (await server.request("/gateway/v1/chat/completions", { method: "POST", headers: bearer(wide.key), json: chat("gpt-4o-mini") }))
        .status,
    ).toBe(200);
    const wideRefused = await server.request("/gateway/v1/chat/completions", {
      method: "POST",
      headers: bearer(wide.key),
      json: chat("echo-1"),
    });
    expect(wideRefused.status).toBe(403);
    expect(wideRefused.body.error.message).toMatch(/Usable models: gpt-4o-mini$/);
    // The user's session has no list: everything.
    expect(
      (await server.request("/gateway/v1/chat/completions", { method: "POST", headers: bearer(alice.token), json: chat("echo-2") })).status,
    ).toBe(200);
  });

  it("holds the Messages and Responses dialects and embeddings to the same lists", async () => {
    const messages = (model: string) => ({ model, max_tokens: 16, messages: [{ role: "user", content: "hi" }] });
    const ok = await server.request("/gateway/v1/messages", { method: "POST", headers: bearer(narrow.key), json: messages("echo-1") });
    expect(ok.status).toBe(200);
    const refused = await server.request("/gateway/v1/messages", { method: "POST", headers: bearer(narrow.key), json: messages("echo-2") });
    expect(refused.status).toBe(403);
    expect(JSON.stringify(refused.body)).toContain("Usable models: echo-1");

    expect(
      (
        await server.request("/gateway/v1/responses", {
          method: "POST",
          headers: bearer(wide.key),
          json: { model: "gpt-4o-mini", input: "hi" },
        })
      ).status,
    ).toBe(200);
    const responses = await server.request("/gateway/v1/responses", {
      method: "POST",
      headers: bearer(wide.key),
      json: { model: "echo-1", input: "hi" },
    });
    expect(responses.status).toBe(403);
    expect(JSON.stringify(responses.body)).toContain("Usable models: gpt-4o-mini");

    const embed = (key: string) =>
      server.request("/gateway/v1/embeddings", { method: "POST", headers: bearer(key), json: { model: "echo-embed", input: "hi" } });
    expect((await embed(narrow.key)).status).toBe(200);
    const embedRefused = await embed(wide.key);
    expect(embedRefused.status).toBe(403);
    expect(embedRefused.body.error.message).toMatch(/Usable models: none$/);
  });

  it("lists only the allowed models to a key, and 404s one it may not use", async () => {
    const ids = async (key: string) =>
      ((await server.request("/gateway/v1/models", { headers: bearer(key) })).body.data as { id: string }[]).map((entry) => entry.id);
    expect(await ids(narrow.key)).toEqual(["echo-1", "echo-embed"]);
    expect(await ids(wide.key)).toEqual(["gpt-4o-mini"]);
    expect((await ids(alice.token)).sort()).toEqual(Object.keys(MODELS).sort());
    const hidden = await server.request("/gateway/v1/models/echo-2", { headers: bearer(narrow.key) });
    const missing = await server.request("/gateway/v1/models/nope", { headers: bearer(narrow.key) });
    expect([hidden.status, missing.status]).toEqual([404, 404]);
  });

  it("holds personal keys on the Account API, set through create and PATCH", async () => {
    const created = await server.request("/account/v1/keys", {
      method: "POST",
      headers: bearer(alice.token),
      json: { name: "laptop", allowedModels: ["echo-2"] },
    });
    expect(created.status).toBe(201);
    expect(created.body.allowedModels).toEqual(["echo-2"]);
    const key = created.body.key as string;
    const ask = (model: string) =>
      server.request("/account/v1/chat/completions", { method: "POST", headers: bearer(key), json: chat(model) });
    expect((await ask("echo-2")).status).toBe(200);
    const refused = await ask("echo-1");
    expect(refused.status).toBe(403);
    expect(JSON.stringify(refused.body)).toContain("Usable models: echo-2");
    const listed = await server.request("/account/v1/models", { headers: bearer(key) });
    expect(listed.body.data.map((entry: { id: string }) => entry.id)).toEqual(["echo-2"]);

    const patched = await server.request(`/account/v1/keys/${created.body.id}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { allowedModels: null },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.allowedModels).toBeNull();
    expect((await ask("echo-1")).status).toBe(200);
    // Another user's key is the same 404 as a missing one.
    const foreign = await server.request(`/account/v1/keys/${created.body.id}`, {
      method: "PATCH",
      headers: bearer(bob.token),
      json: { name: "x" },
    });
    const missing = await server.request("/account/v1/keys/key_missing", {
      method: "PATCH",
      headers: bearer(bob.token),
      json: { name: "x" },
    });
    expect([foreign.status, missing.status]).toEqual([404, 404]);
    expect(withoutRequestId(foreign.body)).toEqual(withoutRequestId(missing.body));
  });

  it("holds platform keys, set through the console's key routes", async () => {
    const account = await platformAccount(server);
    const made = await server.request("/api/api-keys", {
      method: "POST",
      headers: withCookie(account.cookie),
      json: { name: "only echo-1", allowedModels: ["echo-1"] },
    });
    expect(made.status).toBe(201);
    // docs/interface.md 4.3: the create answer is exactly {id, name, key, createdAt}.
    expect(Object.keys(made.body).sort()).toEqual(["createdAt", "id", "key", "name"]);
    const ask = (model: string) =>
      server.request("/api/v1/chat/completions", { method: "POST", headers: bearer(made.body.key), json: chat(model) });
    expect((await ask("echo-1")).status).toBe(200);
    const refused = await ask("echo-2");
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toMatch(/Usable models: echo-1$/);
    const models = await server.request("/api/v1/models", { headers: bearer(made.body.key) });
    expect(models.body.data.map((entry: { id: string }) => entry.id)).toEqual(["echo-1"]);

    const patched = await server.request(`/api/api-keys/${made.body.id}`, {
      method: "PATCH",
      headers: withCookie(account.cookie),
      json: { allowedModels: ["echo-*"] },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.allowedModels).toEqual(["echo-*"]);
    expect((await ask("echo-2")).status).toBe(200);
    const listed = await server.request("/api/api-keys", { headers: withCookie(account.cookie) });
    expect(listed.body.data.find((entry: { id: string }) => entry.id === made.body.id).allowedModels).toEqual(["echo-*"]);
    // The other keys of the workspace are unrestricted.
    expect(
      (await server.request("/api/v1/chat/completions", { method: "POST", headers: bearer(account.key), json: chat("gpt-4o-mini") }))
        .status,
    ).toBe(200);
  });

  it("sets gateway and personal keys' lists through the console's key routes too", async () => {
    const cookie = await consoleSignIn(server, alice.email, alice.password);
    const gateway = await server.request("/api/gateway-keys", {
      method: "POST",
      headers: withCookie(cookie),
      json: { name: "console-made", allowedModels: ["echo-1"] },
    });
    expect(gateway.status).toBe(201);
    const patched = await server.request(`/api/gateway-keys/${gateway.body.id}`, {
      method: "PATCH",
      headers: withCookie(cookie),
      json: { allowedModels: ["echo-2"], allowedTools: ["text_*"] },
    });
    expect(patched.body).toMatchObject({ allowedModels: ["echo-2"], allowedTools: ["text_*"] });
    const ask = (model: string) =>
      server.request("/gateway/v1/chat/completions", { method: "POST", headers: bearer(gateway.body.key), json: chat(model) });
    expect((await ask("echo-2")).status).toBe(200);
    expect((await ask("echo-1")).status).toBe(403);
    const personal = await server.request("/api/personal-keys", { method: "POST", headers: withCookie(cookie), json: { name: "p" } });
    const personalPatched = await server.request(`/api/personal-keys/${personal.body.id}`, {
      method: "PATCH",
      headers: withCookie(cookie),
      json: { allowedModels: ["gpt-*"] },
    });
    expect(personalPatched.body.allowedModels).toEqual(["gpt-*"]);
    const listed = await server.request("/api/personal-keys", { headers: withCookie(cookie) });
    expect(listed.body.data.find((key: { id: string }) => key.id === personal.body.id).allowedModels).toEqual(["gpt-*"]);
  });

  it("refuses bad patterns with 400 on every route that sets them", async () => {
    const cookie = await consoleSignIn(server, alice.email, alice.password);
    const bad = [
      { allowedModels: ["gpt 4"] },
      { allowedModels: "gpt-4*" },
      { allowedTools: [""] },
      { allowedModels: Array.from({ length: 101 }, (_, i) => `m${i}`) },
    ];
    for (const json of bad) {
      const routes = [
        server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(alice.token), json: { name: "bad", ...json } }),
        server.request(`/gateway/v1/auth/keys/${narrow.id}`, { method: "PATCH", headers: bearer(alice.token), json }),
        server.request("/account/v1/keys", { method: "POST", headers: bearer(alice.token), json: { name: "bad", ...json } }),
        server.request("/api/api-keys", { method: "POST", headers: withCookie(cookie), json: { name: "bad", ...json } }),
        server.request(`/gateway/v1/tenants/${alice.user.tenantId}`, { method: "PATCH", headers: bearer(alice.token), json }),
      ];
      for (const res of await Promise.all(routes)) {
        expect(res.status).toBe(400);
        expect(JSON.stringify(res.body)).toMatch(/allowed(Models|Tools)/);
      }
    }
  });

  it("holds every caller of a tenant to its default, together with a key's own list, and leaves other tenants alone", async () => {
    const set = await server.request(`/gateway/v1/tenants/${bob.user.tenantId}`, {
      method: "PATCH",
      headers: bearer(bob.token),
      json: { allowedModels: ["echo-*"] },
    });
    expect(set.status).toBe(200);
    expect(set.body.allowedModels).toEqual(["echo-*"]);
    const bobKey = await gatewayKey(bob.token, { allowedModels: ["echo-2", "gpt-4o-mini"] });
    const ask = (token: string, model: string) =>
      server.request("/gateway/v1/chat/completions", { method: "POST", headers: bearer(token), json: chat(model) });
    expect((await ask(bob.token, "echo-1")).status).toBe(200);
    expect((await ask(bob.token, "gpt-4o-mini")).status).toBe(403);
    // The key allows gpt-4o-mini, the tenant does not: both lists must allow a model.
    const both = await ask(bobKey.key, "gpt-4o-mini");
    expect(both.status).toBe(403);
    expect(both.body.error.message).toMatch(/Usable models: echo-2$/);
    expect((await ask(bobKey.key, "echo-2")).status).toBe(200);
    // Alice's tenant has no default.
    expect((await ask(alice.token, "gpt-4o-mini")).status).toBe(200);
    // Alice cannot set Bob's tenant's list: the same 404 as a missing tenant.
    const foreign = await server.request(`/gateway/v1/tenants/${bob.user.tenantId}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { allowedModels: null },
    });
    expect(foreign.status).toBe(404);
    const cleared = await server.request(`/gateway/v1/tenants/${bob.user.tenantId}`, {
      method: "PATCH",
      headers: bearer(bob.token),
      json: { allowedModels: null },
    });
    expect(cleared.body.allowedModels).toBeNull();
    expect((await ask(bob.token, "gpt-4o-mini")).status).toBe(200);
  });

  it("changes a gateway key's lists through PATCH, effective on the next request; another user's key is 404", async () => {
    const key = await gatewayKey(alice.token, { allowedModels: ["echo-1"] });
    const ask = (model: string) =>
      server.request("/gateway/v1/chat/completions", { method: "POST", headers: bearer(key.key), json: chat(model) });
    expect((await ask("echo-2")).status).toBe(403);
    const patched = await server.request(`/gateway/v1/auth/keys/${key.id}`, {
      method: "PATCH",
      headers: bearer(alice.token),
      json: { allowedModels: ["echo-2"] },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.allowedModels).toEqual(["echo-2"]);
    expect((await ask("echo-2")).status).toBe(200);
    expect((await ask("echo-1")).status).toBe(403);
    const foreign = await server.request(`/gateway/v1/auth/keys/${key.id}`, {
      method: "PATCH",
      headers: bearer(bob.token),
      json: { allowedModels: null },
    });
    const missing = await server.request("/gateway/v1/auth/keys/key_missing", {
      method: "PATCH",
      headers: bearer(bob.token),
      json: { allowedModels: null },
    });
    expect([foreign.status, missing.status]).toEqual([404, 404]);
    expect(withoutRequestId(foreign.body)).toEqual(withoutRequestId(missing.body));
    // A key cannot change keys (nor its own list).
    expect(
      (
        await server.request(`/gateway/v1/auth/keys/${key.id}`, {
          method: "PATCH",
          headers: bearer(key.key),
          json: { allowedModels: null },
        })
      ).status,
    ).toBe(403);
  });
});

describe("agent runs", () => {
  it("hold an agent invoked with a key to the key's model and tool lists", async () => {
    const agent = (
      await server.request("/gateway/v1/agents", {
        method: "POST",
        headers: bearer(alice.token),
        json: { name: `allow-${Date.now()}`, model: "echo-1", tools: ["calculator", "text_stats"] },
      })
    ).body;
    const invoke = (key: string, input: string) =>
      server.request(`/gateway/v1/agents/${agent.id}/invoke`, { method: "POST", headers: bearer(key), json: { input } });
    // The narrow key allows echo-1 and the calculator, not text_stats: that directive is not run.
    const ok = await invoke(narrow.key, '/tool calculator {"expression": "2+2"}');
    expect(ok.body).toMatchObject({ status: "completed", output: "4" });
    const hidden = await invoke(narrow.key, '/tool text_stats {"text": "a b"}');
    expect(hidden.body).toMatchObject({ status: "completed", steps: [] });
    // The wide key allows only gpt-4 models: the agent's echo-1 is refused like in chat.
    const refused = await invoke(wide.key, "hi");
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toMatch(/Usable models: gpt-4o-mini$/);
    expect((await invoke(alice.token, '/tool text_stats {"text": "a b"}')).body.steps).toHaveLength(1);
  });
});

describe("over JSON-RPC (/rpc)", () => {
  it("holds the same methods to the same lists", async () => {
    const call = (key: string, method: string, params: Record<string, unknown>) =>
      server.request("/rpc", { method: "POST", headers: bearer(key), json: { jsonrpc: "2.0", id: 1, method, params } });
    const ok = await call(narrow.key, "gateway.chat.completions", chat("echo-1"));
    expect(ok.body.result.object).toBe("chat.completion");
    const refused = await call(narrow.key, "gateway.chat.completions", chat("echo-2"));
    expect(refused.body.error).toMatchObject({ code: -32003 });
    expect(refused.body.error.message).toMatch(/Usable models: echo-1$/);
    const listed = await call(narrow.key, "gateway.models.list", {});
    expect(listed.body.result.data.map((entry: { id: string }) => entry.id)).toEqual(["echo-1", "echo-embed"]);
    const tool = await call(narrow.key, "mcp.tools.execute", { tool: "current_time", args: {} });
    const unknown = await call(narrow.key, "mcp.tools.execute", { tool: "no_such_tool", args: {} });
    expect(tool.body.error.code).toBe(-32004);
    expect(tool.body.error.code).toBe(unknown.body.error.code);
    expect(tool.body.error.message).toBe("Unknown tool: current_time");
  });
});

describe("tool allow-lists", () => {
  it("lists only the allowed tools over REST, and answers another like an unknown tool", async () => {
    const names = async (key: string) =>
      ((await server.request("/gateway/v1/mcp/tools", { headers: bearer(key) })).body.tools as { name: string }[]).map((tool) => tool.name);
    expect(await names(narrow.key)).toEqual(["calculator", "vm__allow-vm__ok"]);
    expect(await names(wide.key)).toEqual(
      expect.arrayContaining(["calculator", "current_time", "vm__allow-vm__ok", "vm__allow-vm__secret"]),
    );

    const execute = (key: string, tool: string, args: Record<string, unknown> = {}) =>
      server.request(`/gateway/v1/mcp/tools/execute?tool=${tool}`, { method: "POST", headers: bearer(key), json: { args } });
    const ok = await execute(narrow.key, "calculator", { expression: "1 + 2" });
    expect(ok.status).toBe(200);
    expect(ok.body.content[0].text).toBe("3");
    const refused = await execute(narrow.key, "current_time");
    const unknown = await execute(narrow.key, "no_such_tool");
    expect([refused.status, unknown.status]).toEqual([404, 404]);
    expect(refused.body.error.message).toBe("Unknown tool: current_time");
    expect({ ...refused.body.error, message: "", requestId: "" }).toEqual({ ...unknown.body.error, message: "", requestId: "" });
    expect((await execute(wide.key, "current_time")).status).toBe(200);
    expect((await server.request("/gateway/v1/mcp/tools/current_time", { headers: bearer(narrow.key) })).status).toBe(404);
    expect(
      (await server.request("/bridge/v1/mcp/tools", { headers: bearer(narrow.key) })).body.tools.map((tool: { name: string }) => tool.name),
    ).toEqual(["calculator", "vm__allow-vm__ok"]);
  });

  it("holds the bridge's VM tool route to the lists", async () => {
    const run = (key: string, tool: string) =>
      server.request("/bridge/tools/execute", {
        method: "POST",
        headers: bearer(key),
        json: { vm_id: "allow-vm", tool_name: tool, input: {} },
      });
    const ok = await run(narrow.key, "ok");
    expect(ok.status).toBe(200);
    expect(ok.body.content[0].text).toBe("ran ok");
    const refused = await run(narrow.key, "secret");
    const unknown = await run(narrow.key, "nothing");
    expect([refused.status, unknown.status]).toEqual([404, 404]);
    expect(refused.body.error.details.tools).toEqual(["ok"]);
    expect((await run(wide.key, "secret")).status).toBe(200);
  });

  it("shows only allowed tools in MCP tools/list and refuses tools/call of another like an unknown tool", async () => {
    const connect = async (key: string) => {
      const client = new Client({ name: "allow-list", version: "1.0.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(key) } }),
      );
      return client;
    };
    const client = await connect(narrow.key);
    try {
      expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(["calculator", "vm__allow-vm__ok"]);
      const ok = (await client.callTool({ name: "calculator", arguments: { expression: "2 * 3" } })) as CallToolResult;
      expect((ok.content[0] as { text: string }).text).toBe("6");
      const outcome = async (name: string) => {
        try {
          return { result: await client.callTool({ name, arguments: {} }) };
        } catch (error) {
          return { error: { code: (error as { code?: number }).code, message: String((error as Error).message).replace(name, "<name>") } };
        }
      };
      const refused = await outcome("current_time");
      const unknown = await outcome("no_such_tool");
      expect(JSON.stringify(refused).replaceAll("current_time", "<name>")).toBe(
        JSON.stringify(unknown).replaceAll("no_such_tool", "<name>"),
      );
    } finally {
      await client.close();
    }
    const other = await connect(wide.key);
    try {
      expect((await other.listTools()).tools.map((tool) => tool.name)).toContain("current_time");
    } finally {
      await other.close();
    }
  });

  it("holds tool routing and plan execution to the lists", async () => {
    const routable = async (key: string) =>
      ((await server.request("/gateway/v1/mcp/router/tools", { headers: bearer(key) })).body.tools as { name: string }[]).map(
        (tool) => tool.name,
      );
    expect((await routable(narrow.key)).sort()).toEqual(["calculator", "vm__allow-vm__ok"]);
    expect(await routable(wide.key)).toContain("current_time");
    const execute = (key: string, tool: string) =>
      server.request("/gateway/v1/mcp/execute", { method: "POST", headers: bearer(key), json: { steps: [{ tool, args: {} }] } });
    const refused = await execute(narrow.key, "current_time");
    expect(refused.status).toBe(404);
    expect(refused.body.error.message).toBe("Step 0: unknown tool current_time");
    expect((await execute(wide.key, "current_time")).body.steps[0].status).toBe("completed");
  });

  it("holds a tenant's callers to its tool default", async () => {
    const carol = await registerUser(server);
    const set = await server.request(`/gateway/v1/tenants/${carol.user.tenantId}`, {
      method: "PATCH",
      headers: bearer(carol.token),
      json: { allowedTools: ["text_*"] },
    });
    expect(set.status).toBe(200);
    const listed = await server.request("/gateway/v1/mcp/tools", { headers: bearer(carol.token) });
    expect(listed.body.tools.map((tool: { name: string }) => tool.name)).toEqual(["text_stats"]);
    // Alice's tenant (and her unrestricted key) still sees the calculator.
    const alices = await server.request("/gateway/v1/mcp/tools", { headers: bearer(wide.key) });
    expect(alices.body.tools.map((tool: { name: string }) => tool.name)).toContain("calculator");
  });
});
